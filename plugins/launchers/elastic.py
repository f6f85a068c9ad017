"""Starting the worker processes on this machine with torch's elastic agent, as torchrun would.

The workers run a command (by default the same program again) with the variables torchrun sets
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``TORCHELASTIC_RUN_ID``, ...), so they
detect the torch elastic environment and never launch again. The agent watches them: when one fails
or is killed, it stops the others (SIGTERM, then SIGKILL after ``shutdown_timeout`` seconds) and, with
``max_restarts``, starts the whole group again. Each worker prints its own traceback; the launcher
adds one line saying which rank failed and how.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from plugins.launchers.base import Launcher, workers_environment
from plugins.launchers.forkserver import GUARD, Forkserver, worker_forkserver
from plugins.launchers.in_worker import (  # noqa: F401 (re-exported: the launcher's side and the worker's side)
    LAUNCHER_PID,
    record_failure,
    record_failures,
    watch_launcher,
)
from plugins.launchers.threads import worker_thread_env

_QUIET = ("torch.distributed.elastic", "torch.distributed.launcher")
# signals the launcher passes on to its workers (SIGTERM, SIGINT: torch's agent already does)
FORWARDED = (signal.SIGUSR1, signal.SIGUSR2)


def check_port_free(address: str, port: int) -> None:
    """A clear error, before anything starts, when the rendezvous port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("" if address in ("127.0.0.1", "localhost") else address, port))
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                return  # e.g. an address of another host: the agent reports what goes wrong
            raise ValueError(
                f"MASTER_PORT={port} is already in use on this machine (another run, or another program, holds "
                f"it), so the processes cannot meet there. Unset MASTER_PORT to let Relay pick a free port, or "
                f"export MASTER_PORT=<a free port>."
            ) from None


class ElasticLauncher(Launcher):
    """``nprocs`` workers on this node through ``torch.distributed.launcher.api.elastic_launch``."""

    def __init__(
        self, nprocs: int, main_address: str = "127.0.0.1", main_port: int = 29500, max_restarts: int = 0,
        shutdown_timeout: float = 30, monitor_interval: float = 0.1, num_nodes: int = 1, node_rank: int = 0,
    ) -> None:
        if nprocs < 1:
            raise ValueError(f"nprocs={nprocs} must be >= 1.")
        if not 0 <= node_rank < num_nodes:
            raise ValueError(f"node_rank={node_rank} must be in [0, num_nodes={num_nodes}).")
        self.nprocs = nprocs
        self.num_nodes = num_nodes
        self.node_rank = node_rank
        self.main_address = main_address
        self.main_port = main_port
        self.max_restarts = max_restarts
        self.shutdown_timeout = shutdown_timeout
        self.monitor_interval = monitor_interval

    def launch(self, command: list[str], env: dict[str, str] | None = None) -> int:
        """Run ``command`` in every worker; the exit code of the group (0 when all succeeded)."""
        if self.node_rank == 0:  # node 0 hosts the rendezvous
            check_port_free(self.main_address, self.main_port)
        config = self._config()
        threads, message = worker_thread_env(self.nprocs, {**os.environ, **(env or {})})
        if message:
            print(message, file=sys.stderr, flush=True)
        previous = _forward_signals()
        levels = {name: logging.getLogger(name).level for name in _QUIET}
        for name in _QUIET:  # the agent's own INFO/WARNING chatter would bury the worker's traceback
            logging.getLogger(name).setLevel(logging.CRITICAL)
        try:
            with workers_environment({**threads, **(env or {}), LAUNCHER_PID: str(os.getpid())}), \
                    worker_forkserver(command) as forkserver:  # after the variables: the zygote imports under them
                return self._run(config, [*GUARD, str(os.getpid()), *forkserver.guard_args, *command], forkserver)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)

    def _config(self) -> Any:
        from torch.distributed.launcher.api import LaunchConfig

        options: dict[str, Any] = {}
        if "shutdown_timeout" in {f.name for f in dataclasses.fields(LaunchConfig)}:  # torch >= 2.12
            options["shutdown_timeout"] = max(1, int(round(self.shutdown_timeout)))
        if self.num_nodes > 1:  # each node started by hand: torchrun's static rendezvous (--node-rank) at node 0
            options.update(rdzv_backend="static", rdzv_configs={"rank": self.node_rank}, run_id="relay")
        else:
            options.update(rdzv_backend="c10d", run_id=f"relay-{uuid.uuid4().hex[:12]}")
        return LaunchConfig(
            min_nodes=self.num_nodes, max_nodes=self.num_nodes, nproc_per_node=self.nprocs,
            rdzv_endpoint=f"{self.main_address}:{self.main_port}", max_restarts=self.max_restarts,
            monitor_interval=self.monitor_interval, **options,
        )

    def _run(self, config: Any, command: list[str], forkserver: Forkserver) -> int:
        """The elastic agent over ``command``; a failure or a passed-on signal as Relay's one line and exit code."""
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import elastic_launch

        try:
            with _stop_within_shutdown_timeout(self.shutdown_timeout):
                elastic_launch(config, command[0])(*command[1:])
        except ChildFailedError as err:
            rank, failure = root_failure(err.failures, forkserver.ended_at)
            print(describe_failure(rank, failure, self.nprocs, forkserver.worker_pid(failure.pid)), file=sys.stderr,
                  flush=True)
            return 1 if failure.exitcode in (0, None) or failure.exitcode < 0 else failure.exitcode
        except SignalException as err:  # the workers got the signal, saved, and were waited for
            print(f"relay: {signal.Signals(err.sigval).name} received; passed on to the workers, which have "
                  "stopped.", file=sys.stderr, flush=True)
            return 128 + int(err.sigval)
        return 0


@contextlib.contextmanager
def _stop_within_shutdown_timeout(seconds: float) -> Iterator[None]:
    """Give the other workers of a failed group ``shutdown_timeout`` seconds after SIGTERM before SIGKILL, not 30.

    torch's elastic agent (2.13) passes its ``shutdown_timeout`` only when the agent itself gets a signal: a worker
    that fails makes ``SubprocessContext._poll`` call ``close()`` and ``LocalElasticAgent._stop_workers`` call
    ``_shutdown()``, both with their default of 30 s. For the duration of one launch in this (launching) process,
    closing the workers waits ``seconds`` whatever the caller passed.
    """
    from torch.distributed.elastic.multiprocessing.api import PContext

    original = PContext.__dict__.get("close")
    if original is None:
        yield
        return

    def close(self: Any, death_sig: Any = None, timeout: float = seconds) -> None:
        original(self, death_sig=death_sig, timeout=max(1, int(round(seconds))))

    PContext.close = close  # type: ignore[method-assign]
    try:
        yield
    finally:
        PContext.close = original  # type: ignore[method-assign]


def _forward_signals() -> dict[int, Any]:
    """SIGUSR1/SIGUSR2 to the launcher stop the agent the way SIGTERM does: the workers get that same signal
    (to checkpoint) and are waited for ``shutdown_timeout`` seconds; without this the launcher would die at
    once and leave them behind. Returns the previous handlers."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def forward(signum: int, frame: Any) -> None:
        raise SignalException(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            previous[sig] = signal.signal(sig, forward)
    return previous


def root_failure(failures: dict[int, Any], ended_at: Callable[[int], float | None] | None = None) -> tuple[int, Any]:
    """The rank whose error started it: the earliest recorded error, else the rank that ended first.

    That is torch's order (``ChildFailedError.get_first_failure``: whole-second timestamps, ties in the order it saw
    the ranks end, a poll apart) unless ``ended_at`` knows when each one ended (the forkserver's note, by the pid of
    the worker's stand-in): a forked peer that exits at once after its collective failed can end within the same
    poll as the rank that was killed.
    """
    recorded = {r: f for r, f in failures.items() if f.error_file_data.get("message") not in (None, "<NONE>")}
    if recorded:
        rank = min(recorded, key=lambda r: recorded[r].timestamp)
        return rank, recorded[rank]
    ended = {r: ended_at(f.pid) for r, f in failures.items()} if ended_at else {}
    if ended and all(t is not None for t in ended.values()):
        rank = min(ended, key=lambda r: ended[r] or 0.0)
    else:
        rank = min(failures, key=lambda r: failures[r].timestamp)
    return rank, failures[rank]


def describe_failure(rank: int, failure: Any, nprocs: int, pid: int | None = None) -> str:
    """One line: which rank failed, how (its error, when it recorded one), and that the others were stopped.

    ``pid``: the worker's own, where torch elastic knows only the process standing in for it (a forked worker)."""
    code = failure.exitcode
    how = f"was killed by {failure.signal_name()}" if code is not None and code < 0 else f"exited with code {code}"
    message = failure.error_file_data.get("message")
    if isinstance(message, dict) and message.get("message"):
        how += f" ({message['message']})"
    others = "the other rank was stopped" if nprocs == 2 else "the other ranks were stopped"
    where = "its traceback is above" if code is not None and code > 0 else "it printed no traceback"
    return f"relay: rank {rank} (pid {failure.pid if pid is None else pid}) {how}; {others} ({where})."
