"""Checkpoint files on disk, behind one object a strategy holds (``strategy.checkpoint_io``).

Everything about bytes on disk lives here, and nothing about what a checkpoint contains (its keys belong to
the Trainer):

- writes are atomic: a file goes to a temporary name in the same directory, is fsynced, then renamed; a
  directory (a sharded checkpoint) is swapped into place with one atomic exchange where the OS has one
  (Linux ``renameat2``), else renamed aside first and recovered by :meth:`CheckpointIO.recover`;
- temporaries carry the writer's pid, so the next start removes those of writers that are gone;
- reading is data only: ``torch.load(weights_only=True)`` for files, and a restricted unpickler for the
  metadata of a sharded checkpoint (``plugins/strategies/dcp_reader.py``); a caller that passes
  ``weights_only=False`` for a file it trusts (torch's and Lightning's opt-in, which real projects use for
  checkpoints holding their own objects) gets a full ``torch.load`` of that file (``trusted_loads``);
- a failed write or read is one line naming the path and the cause;
- a path may be an fsspec URL (``s3://``, ``gs://``, ``memory://``...): the object is written whole, then
  committed (``autocommit=False`` and ``commit()``; one ``pipe_file`` on stores without that), so no reader
  ever sees part of one; ``file://`` URLs are local paths.

Lightning's names are the primitives (``save_checkpoint``, ``load_checkpoint``, ``remove_checkpoint``,
``teardown``); Relay's callers go through ``save``/``load``/``remove``, which keep a user's override of
``save_checkpoint`` atomic by handing it a temporary path and renaming the finished file into place.
"""

from __future__ import annotations

import contextvars
import enum
import errno
import io as _io
import os
import pickle
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import torch

from plugins.remote_paths import exists, is_url, isfile, local_path, url_fs

TEMP_MARK = ".relaytmp-"
ASIDE_MARK = ".relayold-"
# .<name>.relaytmp-<pid>[-link] or .<name>.relayold-<pid>, written next to <name>
# compiled (and cached by re) on first use
_TEMPORARY = r"^\.(?P<name>.+)(?P<kind>\.relaytmp-|\.relayold-)(?P<pid>\d+|dcp)(?:-link)?$"
_TRUSTED = contextvars.ContextVar("relay_trusted_checkpoint_loads", default=False)


def _torch_opt_out() -> bool:
    """torch's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``, which a read without ``weights_only`` honours in torch and in
    Lightning (lightly-train sets it around its ``Fabric.load`` calls)."""
    return os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in ("1", "y", "yes", "true")


@contextmanager
def trusted_loads(weights_only: bool | None) -> Iterator[None]:
    """Within the block a checkpoint file read with ``weights_only=None`` is unpickled in full when the caller passed
    ``weights_only=False`` (``Trainer.fit(..., weights_only=False)``, ``load_from_checkpoint``, ``Fabric.load``): its
    explicit trust in that file, as torch and Lightning honour it. ``None`` and ``True`` keep reads data only."""
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"weights_only={weights_only!r}: expected True, False or None.")
    token = _TRUSTED.set(True) if weights_only is False else None
    try:
        yield
    finally:
        if token is not None:
            _TRUSTED.reset(token)


def loads_trusted() -> bool:
    """Whether the current call passed ``weights_only=False`` (see ``trusted_loads``)."""
    return _TRUSTED.get()


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, read-only, no permission); the message is one line."""

    def __init__(self, path: str | os.PathLike, cause: BaseException) -> None:
        code = getattr(cause, "errno", None)
        text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        reason = getattr(cause, "strerror", None) or text
        name = errno.errorcode.get(code, "") if code else ""
        hint = {errno.ENOSPC: " free space there or point ModelCheckpoint(dirpath=...) at another disk",
                errno.EDQUOT: " free space there or point ModelCheckpoint(dirpath=...) at another disk",
                errno.EACCES: " make the directory writable or choose another one",
                errno.EROFS: " choose a writable directory", errno.ENOTDIR: " a parent of it is a file"}.get(code, "")
        message = f"cannot write checkpoint {os.fspath(path)!r}: {reason}" + (f" ({name})" if name else "")
        super().__init__(code, message + (f";{hint}." if hint else "."))
        self.path = os.fspath(path)

    def __str__(self) -> str:
        return self.strerror or ""


class CheckpointReadError(ValueError):
    """A checkpoint that is missing, damaged, foreign or unsafe (would run code); the message is one line."""


# the names ``getattr`` has in a pickle (protocol 2 writes Python 2's module name), for ``enum_member``
GETATTR_GLOBALS = ("builtins.getattr", "__builtin__.getattr")


def enum_member(owner: Any, name: Any) -> enum.Enum:
    """``getattr`` as early Python 3.11 releases pickle an Enum member (``getattr(EnumClass, "NAME")``; 3.11.2, Debian
    12's, does; other releases pickle the member's value), for the unpicklers that read checkpoints as data: only a
    member of an enum class the unpickler already let through, never any other attribute."""
    if isinstance(owner, type) and issubclass(owner, enum.Enum) and isinstance(name, str) and name in owner.__members__:
        return owner[name]
    raise pickle.UnpicklingError(f"getattr({owner!r}, {name!r}) is not a member of an allowed enum class")


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class _RecordingFile:
    """A file object that remembers the first ``OSError`` of a write: torch turns it into 'unexpected pos'."""

    def __init__(self, f: Any) -> None:
        self._f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except OSError as err:
            self.error = self.error or err
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def _os_error_in(exc: BaseException) -> OSError | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


@contextmanager
def writing(path: str | os.PathLike, recorder: _RecordingFile | None = None) -> Iterator[None]:
    """Turn any failure of a checkpoint write into one ``CheckpointWriteError`` naming ``path`` and the cause."""
    try:
        yield
    except CheckpointWriteError:
        raise
    except Exception as exc:
        cause = (recorder.error if recorder is not None else None) or _os_error_in(exc)
        if cause is None:
            raise
        raise CheckpointWriteError(path, cause) from None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is unavailable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    return False  # e.g. EINVAL on a filesystem without it: fall back


def checkpoint_io_of(strategy: Any) -> CheckpointIO:
    """The checkpoint I/O a strategy's own saving and loading go through: the one set on the object. A strategy
    class may refuse ``checkpoint_io`` as a public attribute (Lightning's FSDP and model-parallel strategies for
    Fabric raise on it), so this reads the instance's own value first."""
    io = vars(strategy).get("checkpoint_io")
    return io if io is not None else strategy.checkpoint_io


class CheckpointIO:
    """Writes, reads and removes checkpoints for a strategy; see the module docstring.

    Lightning's ``CheckpointIO`` and ``TorchCheckpointIO`` in one: subclass it and override
    ``save_checkpoint`` / ``load_checkpoint`` / ``remove_checkpoint`` to change how bytes are stored; the
    strategy still writes through :meth:`save`, so the file appears atomically whatever the override does.
    """

    is_async = False  # AsyncCheckpointIO: saves return before the bytes are written

    # --- Lightning's interface ----------------------------------------------------------------------
    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any | None = None
    ) -> None:
        """``torch.save`` to a temporary file, fsync, rename (a URL: write the object, then commit it)."""
        if storage_options is not None:
            raise TypeError(
                f"{type(self).__name__}.save_checkpoint(storage_options={storage_options!r}) is not supported by "
                "the built-in checkpoint I/O; pass a CheckpointIO plugin that uses them (Trainer(plugins=[...]))."
            )
        if is_url(path):
            self._save_url(checkpoint, os.fspath(path))
        else:
            self._save_local(checkpoint, Path(local_path(path)))

    def load_checkpoint(
        self, path: str | os.PathLike | IO[bytes], map_location: Any | None = None, weights_only: bool | None = None
    ) -> Any:
        """A checkpoint file as data; in full (any pickled object) only with ``weights_only=False``, given here or to
        the call that reads it (``trusted_loads``). One-line errors for anything else."""
        data_only = weights_only is not False and not (weights_only is None and (loads_trusted() or _torch_opt_out()))
        opened = hasattr(path, "read")  # an open binary file (Lightning's ``load_from_checkpoint`` takes one too)
        shown = str(getattr(path, "name", f"<{type(path).__name__}>")) if opened else os.fspath(path)
        try:
            if opened:
                return torch.load(path, map_location=map_location, weights_only=data_only)
            if is_url(path):
                fs, inner = url_fs(path)
                with fs.open(inner, "rb") as f:
                    return torch.load(f, map_location=map_location, weights_only=data_only)
            return torch.load(local_path(path), map_location=map_location, weights_only=data_only)
        except Exception as err:
            text = str(err)
            unsafe = [line.strip() for line in text.splitlines() if "Unsupported global" in line or "GLOBAL" in line]
            if isinstance(err, pickle.UnpicklingError) and unsafe:
                raise CheckpointReadError(
                    f"ckpt_path={shown!r} was refused: it holds objects other than plain data (tensors, numbers, "
                    f"strings, containers), which could run code when loaded ({unsafe[0]}). If you trust the file, "
                    "load it with weights_only=False (Trainer.fit(..., ckpt_path=..., weights_only=False), "
                    "Module.load_from_checkpoint(path, weights_only=False), Fabric.load(path, weights_only=False))."
                ) from None
            first = text.splitlines()[0] if text else ""
            raise CheckpointReadError(
                f"ckpt_path={shown!r} is not a checkpoint torch can read (damaged or foreign): "
                f"{type(err).__name__}: {first}"
            ) from None

    def remove_checkpoint(self, path: str | os.PathLike) -> None:
        """Delete a checkpoint, file or directory; a missing one is fine."""
        if is_url(path):
            fs, inner = url_fs(path)
            if fs.exists(inner):
                fs.rm(inner, recursive=True)
            return
        _discard(Path(local_path(path)))

    def teardown(self) -> None:
        """Called when a Trainer call ends (also on errors); nothing to release for synchronous writes."""

    # --- Relay's entry points -------------------------------------------------------------------------
    def save(self, checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
        """Write ``checkpoint`` to ``path`` atomically, through ``save_checkpoint`` (a user's override too)."""
        if type(self).save_checkpoint is CheckpointIO.save_checkpoint or is_url(path):
            self.save_checkpoint(checkpoint, path)
            return
        # a plugin's own save_checkpoint may write in place: give it a temporary name, rename when finished
        path = Path(local_path(path))
        tmp = self.temporary(path)
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.save_checkpoint(checkpoint, tmp)
            if not tmp.exists():
                raise CheckpointWriteError(path, FileNotFoundError(
                    errno.ENOENT, f"{type(self).__name__}.save_checkpoint wrote nothing to the path it was given"))
            with writing(path):
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, path)
                fsync_dir(path.parent)
        finally:
            if tmp.exists():
                tmp.unlink()

    def load(self, path: str | os.PathLike) -> Any:
        """A checkpoint file on the CPU, through ``load_checkpoint``; a missing file is a one-line error."""
        if not exists_file(path):
            raise CheckpointReadError(f"ckpt_path={os.fspath(path)!r} does not exist (or is not a file).")
        return self.load_checkpoint(path, map_location="cpu")

    def remove(self, path: str | os.PathLike) -> None:
        self.remove_checkpoint(path)

    def exists(self, path: str | os.PathLike) -> bool:
        """Whether a checkpoint is at ``path`` (an asynchronous writer also counts the one it is writing)."""
        return exists(path)

    # --- names ------------------------------------------------------------------------------------
    @staticmethod
    def temporary(path: str | os.PathLike, tag: str | None = None) -> Path:
        """Where a write of ``path`` goes first: next to it, hidden, named after this writer."""
        path = Path(local_path(path))
        return path.with_name(f".{path.name}{TEMP_MARK}{tag or os.getpid()}")

    # --- writing ----------------------------------------------------------------------------------
    def _save_local(self, checkpoint: dict[str, Any], path: Path) -> None:
        tmp = self.temporary(path)
        recorder: _RecordingFile | None = None
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "wb") as raw:
                recorder = _RecordingFile(raw)
                with writing(path, recorder):
                    torch.save(checkpoint, recorder)
                    raw.flush()
                    os.fsync(raw.fileno())
            with writing(path):
                os.replace(tmp, path)
                fsync_dir(path.parent)
        except OSError as err:
            if isinstance(err, CheckpointWriteError):
                raise
            raise CheckpointWriteError(path, (recorder.error if recorder else None) or err) from None
        finally:
            if tmp.exists():
                tmp.unlink()

    @staticmethod
    def _save_url(checkpoint: dict[str, Any], url: str) -> None:
        """Write the object whole, then commit: no reader sees a part of it, a failure leaves the old one."""
        fs, inner = url_fs(url)
        with writing(url):
            parent = fs._parent(inner)
            if parent and not fs.exists(parent):
                fs.makedirs(parent, exist_ok=True)
            if not _commits_on_request(fs):  # e.g. memory://: a write is visible at once, so pipe it whole
                buffer = _io.BytesIO()
                torch.save(checkpoint, buffer)
                fs.pipe_file(inner, buffer.getvalue())
                return
            f = fs.open(inner, "wb", autocommit=False)
            try:
                torch.save(checkpoint, f)
                f.close()
                f.commit()
            except BaseException:
                f.discard()
                raise

    def replace_dir(self, tmp: str | os.PathLike, target: str | os.PathLike) -> None:
        """Move the finished directory ``tmp`` to ``target``, replacing whatever is there.

        A checkpoint named ``target`` exists at every instant: an existing directory is exchanged with the new
        one atomically; without an exchange primitive it is renamed aside first, and ``recover`` puts it back
        if the process dies before the new one is in place.
        """
        tmp, target = Path(tmp), Path(target)
        with writing(target):
            for child in tmp.iterdir():
                if child.is_file():
                    with open(child, "rb") as f:
                        os.fsync(f.fileno())
            fsync_dir(tmp)
            if target.is_dir() and not target.is_symlink():
                if _exchange(tmp, target):  # tmp now holds the old checkpoint
                    fsync_dir(target.parent)
                    shutil.rmtree(tmp, ignore_errors=True)
                    return
                old = target.with_name(f".{target.name}{ASIDE_MARK}{os.getpid()}")
                os.replace(target, old)
                os.replace(tmp, target)
                fsync_dir(target.parent)
                shutil.rmtree(old, ignore_errors=True)
                return
            if target.exists() or target.is_symlink():
                os.remove(target)
            os.replace(tmp, target)
            fsync_dir(target.parent)

    def link(self, source: str | os.PathLike, target: str | os.PathLike) -> None:
        """``target`` becomes the same checkpoint as ``source``: hard links renamed into place, else a copy
        (on an object store, a server-side copy: the new object appears whole)."""
        if is_url(source) or is_url(target):
            fs, inner_source = url_fs(source)
            _, inner_target = url_fs(target)
            with writing(target):
                fs.copy(inner_source, inner_target, recursive=fs.isdir(inner_source))
            return
        source, target = Path(local_path(source)), Path(local_path(target))
        tmp = target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}-link")
        _discard(tmp)  # temporaries are ours: a plugin's remove_checkpoint only sees checkpoints
        try:
            with writing(target):
                if source.is_dir():
                    shutil.copytree(source, tmp, copy_function=_link_or_copy)
                    self.replace_dir(tmp, target)
                    return
                _link_or_copy(str(source), str(tmp))
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                os.replace(tmp, target)
        finally:
            _discard(tmp)

    # --- after a crash ----------------------------------------------------------------------------
    def recover(self, directory: str | os.PathLike) -> list[Path]:
        """Put back a checkpoint directory a crashed swap left renamed aside; the paths restored."""
        restored: list[Path] = []
        if is_url(directory):  # objects are never renamed aside
            return restored
        directory = Path(local_path(directory))
        if not directory.is_dir():
            return restored
        for entry in directory.iterdir():
            match = re.match(_TEMPORARY, entry.name)
            if match is None or match["kind"] != ASIDE_MARK:
                continue
            target = directory / match["name"]
            if not target.exists() and entry.is_dir():
                try:
                    os.rename(entry, target)
                    restored.append(target)
                except OSError:  # another rank restored it first
                    pass
        return restored

    def cleanup(self, directory: str | os.PathLike) -> list[Path]:
        """At start: recover half-swapped directories, then delete temporaries whose writer is gone."""
        removed: list[Path] = []
        if is_url(directory):  # an uncommitted object is never visible: nothing to clean
            return removed
        self.recover(directory)
        directory = Path(local_path(directory))
        if not directory.is_dir():
            return removed
        for entry in directory.iterdir():
            match = re.match(_TEMPORARY, entry.name)
            if match is None:
                continue
            pid = match["pid"]
            if pid != "dcp" and int(pid) != os.getpid() and pid_alive(int(pid)):
                continue  # a writer that is still running (another job in the same directory)
            _discard(entry)
            removed.append(entry)
        return removed

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TorchCheckpointIO(CheckpointIO):
    """Lightning's name for the default: ``torch.save``/``torch.load`` files, written atomically."""


def exists_file(path: str | os.PathLike) -> bool:
    return isfile(path)


def _commits_on_request(fs: Any) -> bool:
    """Whether ``open(..., autocommit=False)`` on this store holds the object back until ``commit()``.

    fsspec's buffered files (s3fs, gcsfs, adlfs...) and local files do; the memory store publishes a file as
    soon as it is opened."""
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return "memory" not in protocols


def _discard(path: Path) -> None:
    """Delete a local file or directory; a missing one is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # no hard links on this filesystem
        shutil.copy2(src, dst)
        with open(dst, "rb+") as f:
            os.fsync(f.fileno())


# Module-level helpers kept for callers that hold no strategy (conversion, tests).
_DEFAULT = CheckpointIO()
atomic_save = _DEFAULT.save
replace_dir = _DEFAULT.replace_dir
remove_path = _DEFAULT.remove
link_path = _DEFAULT.link
