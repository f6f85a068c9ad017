"""Intra-op threads for the workers a launcher starts on one machine, as torchrun sets them.

Left at torch's default, every worker uses all the machine's cores, so N workers oversubscribe the
cores N times over (measured 5-15x slower steps on 2 cores). torchrun gives each worker its share;
we do the same, and never override a value the user exported.
"""

from __future__ import annotations

import os

THREAD_VARIABLE = "OMP_NUM_THREADS"


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, e.g. a container's or a SLURM step's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def worker_thread_env(nprocs: int, environ: dict[str, str] | None = None) -> tuple[dict[str, str], str | None]:
    """``({"OMP_NUM_THREADS": share}, message)`` for ``nprocs`` local workers; ``({}, None)`` when the user set it."""
    environ = os.environ if environ is None else environ
    if environ.get(THREAD_VARIABLE):
        return {}, None
    cores = available_cores()
    share = max(1, cores // max(1, nprocs))
    message = (f"relay: {THREAD_VARIABLE}={share} for each of the {nprocs} worker processes ({cores} CPU cores / "
               f"{nprocs} processes, as torchrun does); export {THREAD_VARIABLE} to choose another value.")
    return {THREAD_VARIABLE: str(share)}, message
