"""Hugging Face weights in and out: ``safetensors`` files (sharded, with ``model.safetensors.index.json``).

``load_hf_weights(module, directory, key_map)`` reads a Hugging Face checkpoint into a Relay module one shard file at
a time; ``export_hf_weights(source, directory, key_map, config=...)`` writes a Relay checkpoint (a ``.ckpt`` file, a
sharded directory), a module or a state dict as ``safetensors`` shards and their index, which
``transformers``' ``from_pretrained(directory)`` loads. Neither needs ``transformers``; both need ``safetensors``
(``pip install relaytrain[hf]``). Nothing is downloaded: the paths are local.

A key map renames keys on the way: a mapping of regular expressions to replacements, tried in order, the first
that matches applied once (``{r"^model\\.": ""}`` strips a ``model.`` prefix, ``{r"^": "model."}`` adds it); a
replacement of ``None`` drops the key; keys no pattern matches keep their name. A callable ``key -> key | None``
works too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import torch

from plugins.strategies.sharded_checkpoint import ShardedState, join_tensors, tensor_keys
from trainer.checkpointing.files import load_checkpoint

if TYPE_CHECKING:
    import types

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
KeyMap = Union[Mapping[str, Union[str, None]], Callable[[str], Union[str, None]], None]


def _safetensors() -> types.ModuleType:
    try:
        import safetensors.torch
    except ImportError as err:
        raise ImportError("Hugging Face weights need the safetensors package: pip install 'relaytrain[hf]' "
                          "(or pip install safetensors).") from err
    return safetensors


def key_mapper(key_map: KeyMap) -> Callable[[str], str | None]:
    """``key_map`` as a function (see the module docstring)."""
    if key_map is None:
        return lambda key: key
    if callable(key_map):
        return key_map
    rules = [(re.compile(pattern), replacement) for pattern, replacement in key_map.items()]

    def mapped(key: str) -> str | None:
        for pattern, replacement in rules:
            if pattern.match(key):
                return None if replacement is None else pattern.sub(replacement, key, count=1)
        return key

    return mapped


def parse_size(size: int | str) -> int:
    """``5GB``, ``500MB``, ``20KB`` (powers of 1000, as Hugging Face counts) or a number of bytes."""
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B)?\s*", str(size).upper())
    if match is None:
        raise ValueError(f"max_shard_size={size!r}: give bytes or a size such as '5GB', '500MB', '20KB'.")
    number, unit = float(match.group(1)), (match.group(2) or "B")
    base = 1024 if "I" in unit else 1000
    return int(number * base ** "BKMGT".index(unit[0]))


def hf_files(source: str | os.PathLike) -> dict[Path, list[str] | None]:
    """The ``safetensors`` files of a Hugging Face checkpoint and the keys each holds (None: every key in it): a
    directory with an index (sharded) or a single ``model.safetensors``, or one ``.safetensors`` file."""
    path = Path(source)
    if path.is_file():
        return {path: None}
    if not path.is_dir():
        raise FileNotFoundError(f"{str(path)!r} is neither a safetensors file nor a directory holding one.")
    index = path / INDEX_FILE
    if index.is_file():
        weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        files: dict[Path, list[str] | None] = {}
        for key, name in weight_map.items():
            files.setdefault(path / name, []).append(key)  # type: ignore[union-attr]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"{index} names shard files that are not there: {', '.join(missing[:3])}.")
        return files
    if (path / SINGLE_FILE).is_file():
        return {path / SINGLE_FILE: None}
    found = sorted(path.glob("*.safetensors"))
    if len(found) == 1:
        return {found[0]: None}
    raise FileNotFoundError(f"{str(path)!r} has no {INDEX_FILE} and no single {SINGLE_FILE}: not a Hugging Face "
                            "safetensors checkpoint (a .bin checkpoint must be converted to safetensors first).")


@dataclass
class LoadResult:
    """What ``load_hf_weights`` did not match: module keys no file filled, file keys (mapped) the module lacks."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


def load_hf_weights(module: torch.nn.Module, source: str | os.PathLike, key_map: KeyMap = None,
                    strict: bool = True) -> LoadResult:
    """Read a Hugging Face ``safetensors`` checkpoint into ``module``, one shard file at a time (memory: one shard).

    ``strict``: every module key must be filled and every file key (after the map) used, as
    ``load_state_dict(strict=True)``. A module whose parameters are DTensors (FSDP2, TP) gets each full tensor
    distributed to its layout. Returns the keys that did not match (empty when strict)."""
    safetensors = _safetensors()
    mapped = key_mapper(key_map)
    live = module.state_dict()
    filled: set[str] = set()
    unexpected: list[str] = []
    for file, keys in hf_files(source).items():
        part: dict[str, torch.Tensor] = {}
        with safetensors.safe_open(str(file), framework="pt") as f:
            for key in keys if keys is not None else f.keys():
                name = mapped(key)
                if name is None:
                    continue
                if name not in live:
                    unexpected.append(f"{key} (as {name})" if name != key else key)
                    continue
                tensor = f.get_tensor(key)
                target = live[name]
                if tuple(tensor.shape) != tuple(target.shape):
                    raise ValueError(f"{file.name}: {key} has shape {tuple(tensor.shape)}, the module's {name} "
                                     f"{tuple(target.shape)}: a model of another size, or a wrong key map.")
                part[name] = _to_layout(tensor, target)
        module.load_state_dict(part, strict=False, assign=any(t.is_meta for t in live.values()))
        filled.update(part)
    # a tied weight (an LM head sharing the embedding) is filled with the tensor it shares
    spots = {_spot(live[k]) for k in filled if not live[k].is_meta}
    missing = sorted(k for k, v in live.items() if k not in filled and isinstance(v, torch.Tensor)
                     and _spot(v) not in spots)
    if strict and (missing or unexpected):
        shown = [f"missing in the files: {', '.join(missing[:5])}" if missing else "",
                 f"not in the module: {', '.join(unexpected[:5])}" if unexpected else ""]
        raise KeyError(f"The Hugging Face weights in {str(source)!r} do not match the module ("
                       f"{'; '.join(s for s in shown if s)}). Pass key_map={{pattern: replacement}} to rename keys, "
                       "or strict=False.")
    return LoadResult(missing, unexpected)


def _spot(tensor: torch.Tensor) -> tuple[int, int, tuple[int, ...]]:
    local = tensor.to_local() if type(tensor).__name__ == "DTensor" else tensor
    if local.is_meta:
        return (id(local), 0, ())
    return (local.untyped_storage().data_ptr(), local.storage_offset(), tuple(local.shape))


def _to_layout(tensor: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A full tensor in ``target``'s dtype and, for a DTensor target, its mesh and placements."""
    tensor = tensor.to(target.dtype)
    if type(target).__name__ == "DTensor":
        from torch.distributed.tensor import distribute_tensor

        return distribute_tensor(tensor.to(target.device), target.device_mesh, target.placements)
    if target.is_meta:
        return tensor
    return tensor.to(target.device)


# --- out ---------------------------------------------------------------------------------------------------------
def relay_state_dict(source: torch.nn.Module | Mapping[str, object] | str | os.PathLike) -> dict[str, torch.Tensor]:
    """The module weights of ``source``: a Relay checkpoint (a ``.ckpt`` file or a sharded directory), a
    ``torch.nn.Module`` or a state dict; whole tensors on the CPU (DTensor shards are gathered)."""
    if isinstance(source, torch.nn.Module):
        state: Mapping[str, Any] = source.state_dict()
    elif isinstance(source, Mapping):
        state = source
    else:
        state = _checkpoint_weights(source)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue
        if type(value).__name__ == "DTensor":
            value = value.full_tensor()
        out[key] = value.detach().cpu()
    return out


def _checkpoint_weights(path: str | os.PathLike) -> Mapping[str, Any]:
    checkpoint = load_checkpoint(path)
    state = checkpoint["state_dict"]
    if isinstance(state, ShardedState):  # a sharded directory: read the module's tensors whole, not the optimizer's
        from torch.distributed.checkpoint.metadata import TensorStorageMetadata

        metadata = state.metadata()
        targets = {}
        for key in tensor_keys(state.skeleton):
            saved = metadata.get(key)
            if isinstance(saved, TensorStorageMetadata):
                targets[key] = torch.empty(tuple(saved.size), dtype=saved.properties.dtype)
        state.read(targets)
        return join_tensors(state.skeleton, targets)
    if hasattr(state, "full_state_dict"):  # a DeepSpeed directory: its merged fp32 weights
        return state.full_state_dict()
    return state


def export_hf_weights(source: torch.nn.Module | Mapping[str, object] | str | os.PathLike, directory: str | os.PathLike, key_map: KeyMap = None,
                      max_shard_size: int | str = "5GB", config: Any = None,
                      dtype: torch.dtype | None = None) -> Path:
    """Write ``source``'s weights (see ``relay_state_dict``) as Hugging Face ``safetensors`` into ``directory``:
    ``model.safetensors``, or shards ``model-0000i-of-0000n.safetensors`` and ``model.safetensors.index.json`` when
    they exceed ``max_shard_size``. ``config``: a ``transformers`` config (``save_pretrained``), a dict, or a path to a
    ``config.json`` (or a directory holding one), written as ``config.json`` so ``from_pretrained(directory)`` works.
    ``dtype``: cast floating-point tensors (e.g. ``torch.bfloat16``). Returns ``directory``."""
    safetensors = _safetensors()
    mapped = key_mapper(key_map)
    tensors: dict[str, torch.Tensor] = {}
    for key, tensor in relay_state_dict(source).items():
        name = mapped(key)
        if name is None:
            continue
        if name in tensors:
            raise ValueError(f"The key map sends two keys to {name!r}; give each its own name (or None to drop).")
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        tensors[name] = tensor
    tensors = _unshared(tensors)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("model*.safetensors"), out / INDEX_FILE]:  # a previous export's shards must not mix in
        old.unlink(missing_ok=True)
    shards = _shards(tensors, parse_size(max_shard_size))
    names = [SINGLE_FILE] if len(shards) == 1 else [
        f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map: dict[str, str] = {}
    for name, shard in zip(names, shards):
        _atomic(out / name, lambda tmp, shard=shard: safetensors.torch.save_file(shard, str(tmp),
                                                                                 metadata={"format": "pt"}))
        weight_map.update(dict.fromkeys(shard, name))
    if len(shards) > 1:
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        _atomic(out / INDEX_FILE, lambda tmp: tmp.write_text(json.dumps(index, indent=2) + "\n"))
    if config is not None:
        _write_config(config, out)
    return out


def _unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Tensors that share memory (tied embeddings) each get their own copy: safetensors stores no aliases, and
    ``from_pretrained`` ties them again from the config."""
    seen: set[tuple[int, int]] = set()
    out = {}
    for key, tensor in tensors.items():
        spot = (tensor.untyped_storage().data_ptr(), tensor.storage_offset()) if tensor.numel() else (id(tensor), 0)
        whole = tensor.numel() * tensor.element_size() == tensor.untyped_storage().nbytes()
        out[key] = tensor.contiguous() if spot not in seen and whole else tensor.clone().contiguous()
        seen.add(spot)
    return out


def _shards(tensors: dict[str, torch.Tensor], limit: int) -> list[dict[str, torch.Tensor]]:
    """Tensors in order, a new shard when the next would pass ``limit`` (a tensor larger than it: a shard alone)."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for key, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > limit:
            shards.append({})
            size = 0
        shards[-1][key] = tensor
        size += nbytes
    return shards


def _atomic(path: Path, write: Callable[[Path], object]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_config(config: Any, out: Path) -> None:
    if hasattr(config, "save_pretrained"):  # a transformers PretrainedConfig
        config.save_pretrained(str(out))
        return
    if isinstance(config, Mapping):
        text = json.dumps(dict(config), indent=2) + "\n"
    else:
        path = Path(config)
        text = (path / "config.json" if path.is_dir() else path).read_text()
    _atomic(out / "config.json", lambda tmp: tmp.write_text(text))


def parse_key_map(rules: Iterable[str]) -> dict[str, str | None]:
    """``PATTERN=REPLACEMENT`` strings (the CLI's ``--map``); ``PATTERN=`` with nothing after ``=`` replaces by
    the empty string, ``PATTERN`` alone drops the matching keys."""
    out: dict[str, str | None] = {}
    for rule in rules:
        pattern, sep, replacement = rule.partition("=")
        out[pattern] = replacement if sep else None
    return out
