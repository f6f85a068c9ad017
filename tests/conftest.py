"""Settings for the whole test run.

The suite runs on pytest-xdist workers (``-n auto --dist loadfile`` in pyproject.toml): one per core, at most
four, each taking whole files so a module's launched job (a module-scoped fixture) is shared by its tests. Most
of the suite's time is spent waiting on subprocesses (imports, rendezvous, timeouts), so two workers on CI's two
cores finish it in a little over half the time. ``-n 0`` runs it in one process.
"""

from __future__ import annotations

import os

MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config) -> int:  # noqa: ANN001 (pytest's hook signature)
    """``-n auto``: one worker per core, at most four (each multi-process test already starts 2-4 processes)."""
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def pytest_configure(config) -> None:  # noqa: ANN001
    """On an xdist worker, torch uses one intra-op thread, in the worker and (through ``OMP_NUM_THREADS``, unless
    it is set already) in the programs the tests start: several workers share the cores, and OpenMP threads
    spinning against each other's made single-process training tests many times slower (measured next to one other
    job: tests/plugins/test_precision.py's bf16 run of the bundled example took 250 s with torch's default two
    threads, 14 s with one). tests/distributed/test_worker_threads.py
    clears the variable where it tests the launcher's own choice."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        os.environ.setdefault("OMP_NUM_THREADS", "1")
        torch.set_num_threads(1)
