"""Reading a sharded (DCP) checkpoint as data: torch's reader, without its plain ``pickle.load``.

``torch.distributed.checkpoint``'s ``FileSystemReader`` unpickles ``.metadata`` with plain pickle, so a
crafted directory could run code the moment it is opened. This reader unpickles it with an allow-list (the
DCP metadata classes, torch dtypes/sizes/layouts, paths), refuses non-tensor entries (they would be read
with ``weights_only=False``; Relay never writes any), and checks every shard file against the metadata
before reading, so a damaged shard is reported by name instead of as a deep torch error.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import StorageMeta

from plugins.checkpoint_io import GETATTR_GLOBALS, CheckpointReadError, enum_member

_METADATA_MODULE = "torch.distributed.checkpoint.metadata"
_ALLOWED = {
    (_METADATA_MODULE, name) for name in (
        "Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata", "TensorProperties",
        "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.distributed.checkpoint._extension", "StreamTransformExtension"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("collections", "OrderedDict"),
    ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath"),
    ("pathlib", "PureWindowsPath"), ("pathlib", "Path"),
}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if f"{module}.{name}" in GETATTR_GLOBALS:  # an enum member as early Python 3.11 releases pickle one
            return enum_member
        if module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.layout,
                                                                          torch.memory_format)):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"global '{module}.{name}' is not a DCP metadata class")


def load_metadata(stream: Any, shown: str) -> Any:
    """Unpickle DCP metadata through the allow-list; anything else is a ``CheckpointReadError``."""
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata

    try:
        metadata = _MetadataUnpickler(stream).load()
    except pickle.UnpicklingError as err:
        raise CheckpointReadError(
            f"ckpt_path={shown!r} was refused: its .metadata holds objects other than checkpoint metadata, which "
            f"could run code when loaded ({err})."
        ) from None
    except Exception as err:
        raise CheckpointReadError(
            f"ckpt_path={shown!r}: its .metadata is damaged ({type(err).__name__}: {str(err)[:200]})."
        ) from None
    if not isinstance(metadata, Metadata):
        raise CheckpointReadError(f"ckpt_path={shown!r}: its .metadata is not DCP metadata "
                                  f"(found {type(metadata).__name__}).")
    raw = [k for k, v in metadata.state_dict_metadata.items() if isinstance(v, BytesStorageMetadata)]
    if raw:
        raise CheckpointReadError(
            f"ckpt_path={shown!r} was refused: it has non-tensor entries ({', '.join(raw[:3])}), which torch reads "
            "with weights_only=False; a Relay checkpoint stores only tensors there."
        )
    return metadata


class SafeFileSystemReader(FileSystemReader):
    """``FileSystemReader`` that reads metadata through the allow-list and checks shard files first."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
        path = self._get_metadata_path(kwargs.get("rank"))
        shown = os.fspath(self.path)
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            raise CheckpointReadError(f"ckpt_path={shown!r}: cannot read {path}: {err.strerror or err}.") from None
        metadata = load_metadata(io.BytesIO(data), shown)
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(self, metadata: Any, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        check_shard_files(Path(self.path), self.storage_data)

    def read_data(self, plan: Any, planner: Any) -> Any:
        try:
            return super().read_data(plan, planner)
        except CheckpointReadError:
            raise
        except Exception as err:
            files = sorted({self.storage_data[item.storage_index].relative_path for item in plan.items})
            raise CheckpointReadError(
                f"ckpt_path={os.fspath(self.path)!r}: damaged shard file(s) {', '.join(files)}: "
                f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
            ) from None


def check_shard_files(directory: Path, storage_data: dict[Any, Any]) -> None:
    """Every shard file the metadata names exists and is long enough; else name the damaged ones."""
    needed: dict[str, int] = {}
    for info in storage_data.values():
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), info.offset + info.length)
    problems = []
    for name, size in sorted(needed.items()):
        if Path(name).name != name:
            problems.append(f"{name} (not a file name inside the checkpoint)")
            continue
        try:
            have = (directory / name).stat().st_size
        except FileNotFoundError:
            problems.append(f"{name} (missing)")
            continue
        if have < size:
            problems.append(f"{name} ({have} bytes, the metadata expects at least {size}: truncated)")
    if problems:
        raise CheckpointReadError(
            f"ckpt_path={str(directory)!r} has damaged shard files: {'; '.join(problems)}. Resume from another "
            "checkpoint (an earlier epoch=...-step=... one), or rewrite this one."
        )
