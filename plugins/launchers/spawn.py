"""Running a function in freshly spawned (or forked) worker processes and handing rank 0's result back.

This is how ``ddp_spawn`` / ``ddp_notebook`` work without running the script again: the launching process
stays alive, ``torch.multiprocessing`` starts the workers with torchrun's variables set (so they find their
rank exactly as under torchrun), and what the function returns on rank 0 comes back as bytes. A worker
that fails prints its traceback, stops the others, and its exception's type and first line are in the launching
process's error (Lightning's carries the whole traceback text).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

from plugins.environments.local import find_free_port
from plugins.launchers.base import Launcher, RankFailedError
from plugins.launchers.elastic import LAUNCHER_PID

# signals the launching process passes on to its workers (preemption: every worker checkpoints and exits)
FORWARDED = ("SIGTERM", "SIGUSR1", "SIGUSR2")

START_METHODS = ("spawn", "fork", "forkserver")


class WorkerFailure(tuple):
    """``(rank, "Type: message")``: what a failed worker sends before it leaves, for the launching process's error."""


def _worker(local_rank: int, nprocs: int, address: str, port: int, run_id: str, function: Callable[..., Any],
            args: tuple[Any, ...], queue: Any) -> None:
    os.environ.update({
        "RANK": str(local_rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(nprocs),
        "LOCAL_WORLD_SIZE": str(nprocs), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(local_rank),
        "ROLE_WORLD_SIZE": str(nprocs), "MASTER_ADDR": address, "MASTER_PORT": str(port),
        "TORCHELASTIC_RUN_ID": run_id,
        LAUNCHER_PID: str(os.getppid()),  # the worker dies with the launching process (watch_launcher)
    })
    try:
        result = function(*args)
    except SystemExit as done:  # e.g. a preemption checkpoint was written: leave with its documented code
        import sys

        sys.stderr.flush()
        os._exit(done.code if isinstance(done.code, int) else 1)
    except BaseException as err:  # print it here and leave at once: waiting for peers at exit could hang
        import sys
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        queue.put(WorkerFailure((local_rank, f"{type(err).__name__}: {first}" if first else type(err).__name__)))
        os._exit(1)
    if local_rank == 0:
        queue.put(result)


class SpawnLauncher(Launcher):
    """``nprocs`` workers on this machine via ``torch.multiprocessing.start_processes``."""

    def __init__(self, nprocs: int, start_method: str = "spawn", main_address: str = "127.0.0.1",
                 main_port: int | None = None) -> None:
        if nprocs < 1:
            raise ValueError(f"nprocs={nprocs} must be >= 1.")
        if start_method not in START_METHODS:
            raise ValueError(f"start_method={start_method!r} is not valid; use one of {', '.join(START_METHODS)}.")
        self.nprocs = nprocs
        self.start_method = start_method
        self.main_address = main_address
        self.main_port = main_port

    @property
    def is_interactive_compatible(self) -> bool:
        return self.start_method == "fork"

    def launch(self, command: list[str], env: dict[str, str] | None = None) -> int:
        raise NotImplementedError("SpawnLauncher runs a function (launch_function), not a command.")

    def launch_function(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run ``function(*args)`` in every worker; rank 0's return value (the others' are dropped)."""
        import torch
        import torch.multiprocessing as mp

        if self.start_method == "fork":
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                raise RuntimeError(
                    "strategy='ddp_notebook' (fork) cannot start workers after CUDA was initialised in this process; "
                    "restart the kernel and create the Trainer before touching CUDA, or use strategy='ddp_spawn'."
                )

        port = self.main_port or find_free_port(self.main_address)
        queue = mp.get_context(self.start_method).SimpleQueue()
        run_id = f"relay-spawn-{uuid.uuid4().hex[:12]}"
        context = mp.start_processes(
            _worker, args=(self.nprocs, self.main_address, port, run_id, function, args, queue),
            nprocs=self.nprocs, start_method=self.start_method, join=False,
        )
        previous = _forward_signals_to(context.processes)
        try:
            return _collect(context, queue, self.nprocs)
        finally:
            import signal

            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _forward_signals_to(processes: list[Any]) -> dict[int, Any]:
    """Pass preemption signals on to the workers (main thread only); the previous handlers, to restore."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def forward(signum: int, frame: Any) -> None:
        for process in processes:
            if process.is_alive():
                os.kill(process.pid, signum)

    previous = {}
    for name in FORWARDED:
        sig = getattr(signal, name)
        previous[sig] = signal.signal(sig, forward)
    return previous


def _collect(context: Any, queue: Any, nprocs: int) -> Any:
    """Rank 0's result once every worker is done; a worker that exits 128+N (a signal's checkpoint) exits too."""
    from torch.multiprocessing.spawn import ProcessException

    results: list[Any] = []
    failures: dict[int, str] = {}

    def read() -> None:
        while not queue.empty():
            item = queue.get()
            if isinstance(item, WorkerFailure):
                failures[item[0]] = item[1]
            else:
                results.append(item)

    while True:  # read while the workers run: a large result would otherwise block rank 0 in put()
        read()
        try:
            if context.join(timeout=0.05):
                break
        except ProcessException as err:  # the others were stopped by join()
            code = getattr(err, "exit_code", None)
            if isinstance(code, int) and code > 128:  # preempted: the workers wrote their checkpoint
                raise SystemExit(code) from None
            read()
            error = failures.get(err.error_index)
            reason = f"exit code {code}" if code else "an exception"
            raise RankFailedError(err.error_index, f"{error}; {reason}" if error else reason, nprocs) from None
    read()
    return results[0] if results else None
