"""``AsyncCheckpointIO``: checkpoints written by a background thread while training goes on.

A save copies the checkpoint's tensors into CPU buffers (reused from one save to the next) and returns; one
worker thread then writes the copy through the wrapped ``CheckpointIO`` (temporary file, fsync, rename; or
write-then-commit on an object store). Tensors that only an optimizer step changes (parameters and optimizer
state, when the Trainer names its optimizers with :meth:`track_optimizers`) are copied by the worker while the
next forward and backward run; the next ``optimizer.step()`` waits for that copy (a global step pre-hook).
Everything else (buffers such as BatchNorm statistics, RNG states) is copied before ``save`` returns.
Every guarantee of a synchronous write holds:

- atomic: readers see the previous file or the new one, never a part (a SIGKILL mid-write leaves a hidden
  temporary that the next start removes);
- at most one save in flight: a new save first waits for the previous one (its stall then includes the
  rest of that write), so memory holds one snapshot at most;
- ordered: removing or linking a file (top-k rotation, ``last``) is queued behind the write it depends on;
- a failed write raises at the next save, load or ``teardown``; the Trainer calls ``teardown`` when a fit
  ends (also on an exception), and the interpreter waits for a write in flight before exiting.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from plugins.apply_func import apply_to_collection
from plugins.checkpoint_io import CheckpointIO


class AsyncCheckpointIO(CheckpointIO):
    """Wraps ``checkpoint_io`` (default: Relay's atomic ``CheckpointIO``) and writes through it in a thread."""

    is_async = True

    def __init__(self, checkpoint_io: CheckpointIO | None = None) -> None:
        if checkpoint_io is not None and not isinstance(checkpoint_io, CheckpointIO):
            raise TypeError(
                f"AsyncCheckpointIO(checkpoint_io={checkpoint_io!r}): expected a CheckpointIO (e.g. "
                "TorchCheckpointIO() or a subclass of CheckpointIO), or None for the default."
            )
        if isinstance(checkpoint_io, AsyncCheckpointIO):
            raise TypeError("AsyncCheckpointIO(checkpoint_io=AsyncCheckpointIO(...)): wrap a synchronous CheckpointIO.")
        self.checkpoint_io: CheckpointIO = checkpoint_io or CheckpointIO()
        self._executor: ThreadPoolExecutor | None = None
        self._last: Future | None = None
        self._error: BaseException | None = None
        self._writing: set[str] = set()
        self._lock = threading.Lock()
        self._buffers: list[torch.Tensor] = []
        self._optimizers: Callable[[], Any] | None = None
        self._copied = threading.Event()
        self._copied.set()
        self._step_hook: Any = None
        _LIVE.add(self)

    def track_optimizers(self, optimizers: Callable[[], Any]) -> None:
        """``optimizers()`` lists the optimizers whose parameters and state may be copied after ``save`` returns
        (until their next step). Without it, every tensor is copied before ``save`` returns."""
        self._optimizers = optimizers

    def deferrable(self) -> set[int]:
        """Storage addresses of the tensors only an optimizer step changes (CPU tensors; others copy now)."""
        found: set[int] = set()
        for optimizer in (self._optimizers() if self._optimizers is not None else None) or []:
            for group in optimizer.param_groups:
                found.update(storage_address(p) for p in group["params"])
            for state in optimizer.state.values():
                found.update(storage_address(v) for v in state.values() if isinstance(v, torch.Tensor))
        found.discard(None)
        return found

    def hold_optimizer_steps(self, copied: Future) -> None:
        """Until ``copied`` is done (its copy of the tensors an optimizer step changes: DCP's staging of the
        shards), every optimizer step waits."""
        self._hold_steps()
        copied.add_done_callback(lambda _: self._copied.set())

    def _hold_steps(self) -> None:
        if self._step_hook is None:
            from torch.optim.optimizer import register_optimizer_step_pre_hook

            self._step_hook = register_optimizer_step_pre_hook(self._wait_for_copy)
        self._copied.clear()

    def _wait_for_copy(self, *_: Any) -> None:
        """Before any optimizer step: the copy of the state it would change must be finished."""
        if not self._copied.is_set():
            self._copied.wait()

    # --- the worker -------------------------------------------------------------------------------
    def submit(self, work: Callable[..., Any], *args: Any) -> None:
        """Queue ``work(*args)`` behind everything queued before; its failure is raised by :meth:`wait`."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-checkpoint")
        self._last = self._executor.submit(self._run, work, args)

    def _run(self, work: Callable[..., Any], args: tuple) -> None:
        try:
            work(*args)
        except BaseException as err:  # kept for the caller's thread
            with self._lock:
                self._error = self._error or err

    def wait(self) -> None:
        """Block until every queued write is done; raise the first failure among them (once)."""
        if self._last is not None:
            self._last.result()
            self._last = None
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    @property
    def in_flight(self) -> bool:
        return self._last is not None and not self._last.done()

    # --- Lightning's interface ----------------------------------------------------------------------
    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any | None = None
    ) -> None:
        """Wait for the previous save, copy ``checkpoint``'s tensors to CPU memory, write them in the background."""
        self.wait()
        later: list[tuple[torch.Tensor, torch.Tensor]] = []
        snapshot = self.snapshot(checkpoint, self.deferrable(), later)
        key = os.fspath(path)
        with self._lock:
            self._writing.add(key)
        if later:
            self._hold_steps()
        self.submit(self._write, snapshot, key, storage_options, later)

    def _write(self, snapshot: dict[str, Any], path: str, storage_options: Any,
               later: list[tuple[torch.Tensor, torch.Tensor]] = ()) -> None:
        try:
            try:
                for source, buffer in later:
                    buffer.copy_(source)
            finally:
                self._copied.set()
            if storage_options is None:
                self.checkpoint_io.save(snapshot, path)
            else:
                self.checkpoint_io.save_checkpoint(snapshot, path, storage_options=storage_options)
        finally:
            with self._lock:
                self._writing.discard(path)

    def load_checkpoint(
        self, path: str | os.PathLike, map_location: Any | None = None, weights_only: bool | None = None
    ) -> Any:
        self.wait()
        return self.checkpoint_io.load_checkpoint(path, map_location=map_location, weights_only=weights_only)

    def remove_checkpoint(self, path: str | os.PathLike) -> None:
        """Queued: a file is removed only after the writes queued before (its replacement) are done."""
        self.submit(self.checkpoint_io.remove, path)

    def teardown(self) -> None:
        """Wait for the write in flight, stop the worker, free the buffers; raise a failed write's error."""
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            self._copied.set()
            if self._step_hook is not None:
                self._step_hook.remove()
                self._step_hook = None
            self._buffers = []
            self.checkpoint_io.teardown()

    # --- Relay's entry points -------------------------------------------------------------------------
    def save(self, checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
        self.save_checkpoint(checkpoint, path)

    def load(self, path: str | os.PathLike) -> Any:
        self.wait()
        return self.checkpoint_io.load(path)

    def remove(self, path: str | os.PathLike) -> None:
        self.remove_checkpoint(path)

    def link(self, source: str | os.PathLike, target: str | os.PathLike) -> None:
        """Queued behind the write of ``source``."""
        self.submit(self.checkpoint_io.link, source, target)

    def exists(self, path: str | os.PathLike) -> bool:
        with self._lock:
            if os.fspath(path) in self._writing:
                return True
        return self.checkpoint_io.exists(path)

    def replace_dir(self, tmp: str | os.PathLike, target: str | os.PathLike) -> None:
        self.checkpoint_io.replace_dir(tmp, target)

    def recover(self, directory: str | os.PathLike) -> list:
        self.wait()
        return self.checkpoint_io.recover(directory)

    def cleanup(self, directory: str | os.PathLike) -> list:
        self.wait()
        return self.checkpoint_io.cleanup(directory)

    # --- the copy ---------------------------------------------------------------------------------
    def snapshot(self, checkpoint: Any, deferrable: set[int] | None = None,
                 later: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> Any:
        """``checkpoint`` with every tensor copied to CPU memory (into the buffers of the previous save when
        shapes match: fresh allocations cost page faults on every save). A CPU tensor whose storage is in
        ``deferrable`` is not copied yet: ``(tensor, buffer)`` goes to ``later`` for the worker."""
        buffers, used, on_gpu = self._buffers, [], False

        def copy(tensor: torch.Tensor) -> torch.Tensor:
            nonlocal on_gpu
            tensor = tensor.detach()
            index = len(used)
            buffer = buffers[index] if index < len(buffers) else None
            if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
                buffer = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu",
                                     pin_memory=tensor.is_cuda and torch.cuda.is_available())
            on_gpu = on_gpu or tensor.device.type != "cpu"
            if (later is not None and deferrable and tensor.device.type == "cpu"
                    and storage_address(tensor) in deferrable):
                later.append((tensor, buffer))
            else:
                buffer.copy_(tensor, non_blocking=tensor.is_cuda)
            used.append(buffer)
            return buffer

        copied = apply_to_collection(checkpoint, torch.Tensor, copy)
        if on_gpu and torch.cuda.is_available():
            torch.cuda.synchronize()
        self._buffers = used
        return copied

    def __repr__(self) -> str:
        return f"AsyncCheckpointIO(checkpoint_io={self.checkpoint_io!r})"


def storage_address(tensor: Any) -> int | None:
    """Where ``tensor``'s (local shard's) storage is, to tell which tensors an optimizer step changes; None for
    one without storage (a meta or fake tensor)."""
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    try:
        return local.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # e.g. a meta or fake tensor
        return None


_LIVE: weakref.WeakSet[AsyncCheckpointIO] = weakref.WeakSet()


@atexit.register
def _finish_writes_at_exit() -> None:
    """A script that ends (or fails) with a write in flight waits for it, so the file is complete."""
    for writer in list(_LIVE):
        try:
            writer.teardown()
        except BaseException as err:  # the process is ending: say so, do not hide it
            print(f"relay: an asynchronous checkpoint write failed: {err}", file=sys.stderr)
