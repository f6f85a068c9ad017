"""Checkpoint files on disk, behind one object a strategy holds (``strategy.checkpoint_io``).

Everything about bytes on disk lives here, and nothing about what a checkpoint contains (its keys belong to
the Trainer):

- writes are atomic: a file goes to a temporary name in the same directory, is fsynced, then renamed; a
  directory (a sharded checkpoint) is swapped into place with one atomic exchange where the OS has one
  (Linux ``renameat2``), else renamed aside first and recovered by :meth:`CheckpointIO.recover`;
- temporaries carry the writer's pid, so the next start removes those of writers that are gone;
- reading is data only: ``torch.load(weights_only=True)`` for files, and a restricted unpickler for the
  metadata of a sharded checkpoint (``plugins/strategies/dcp_reader.py``);
- a failed write or read is one line naming the path and the cause.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

TEMP_MARK = ".relaytmp-"
ASIDE_MARK = ".relayold-"
# .<name>.relaytmp-<pid>[-link] or .<name>.relayold-<pid>, written next to <name>
_TEMPORARY = re.compile(r"^\.(?P<name>.+)(?P<kind>\.relaytmp-|\.relayold-)(?P<pid>\d+|dcp)(?:-link)?$")


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


class CheckpointIO:
    """Writes, reads and removes checkpoints for a strategy; see the module docstring."""

    # --- names ------------------------------------------------------------------------------------
    @staticmethod
    def temporary(path: str | os.PathLike, tag: str | None = None) -> Path:
        """Where a write of ``path`` goes first: next to it, hidden, named after this writer."""
        path = Path(path)
        return path.with_name(f".{path.name}{TEMP_MARK}{tag or os.getpid()}")

    # --- writing ----------------------------------------------------------------------------------
    def save(self, checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
        """``torch.save`` to a temporary file, fsync, rename: a crash leaves the old file intact."""
        path = Path(path)
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
        """``target`` becomes the same checkpoint as ``source``: hard links renamed into place, else a copy."""
        source, target = Path(source), Path(target)
        tmp = target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}-link")
        self.remove(tmp)
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
            self.remove(tmp)

    def remove(self, path: str | os.PathLike) -> None:
        """Delete a checkpoint, file or directory; a missing one is fine."""
        path = Path(path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    # --- after a crash ----------------------------------------------------------------------------
    def recover(self, directory: str | os.PathLike) -> list[Path]:
        """Put back a checkpoint directory a crashed swap left renamed aside; the paths restored."""
        restored: list[Path] = []
        directory = Path(directory)
        if not directory.is_dir():
            return restored
        for entry in directory.iterdir():
            match = _TEMPORARY.match(entry.name)
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
        self.recover(directory)
        removed: list[Path] = []
        directory = Path(directory)
        if not directory.is_dir():
            return removed
        for entry in directory.iterdir():
            match = _TEMPORARY.match(entry.name)
            if match is None:
                continue
            pid = match["pid"]
            if pid != "dcp" and int(pid) != os.getpid() and pid_alive(int(pid)):
                continue  # a writer that is still running (another job in the same directory)
            self.remove(entry)
            removed.append(entry)
        return removed

    # --- reading ----------------------------------------------------------------------------------
    def load(self, path: str | os.PathLike) -> Any:
        """A checkpoint file as data (``weights_only``), on the CPU; one-line errors for anything else."""
        path = Path(path)
        if not path.is_file():
            raise CheckpointReadError(f"ckpt_path={str(path)!r} does not exist (or is not a file).")
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:
            text = str(err)
            unsafe = [line.strip() for line in text.splitlines() if "Unsupported global" in line or "GLOBAL" in line]
            if isinstance(err, pickle.UnpicklingError) and unsafe:
                raise CheckpointReadError(
                    f"ckpt_path={str(path)!r} was refused: it holds objects other than plain data (tensors, numbers, "
                    f"strings, containers), which could run code when loaded ({unsafe[0]})."
                ) from None
            first = text.splitlines()[0] if text else ""
            raise CheckpointReadError(
                f"ckpt_path={str(path)!r} is not a checkpoint torch can read (damaged or foreign): "
                f"{type(err).__name__}: {first}"
            ) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


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
