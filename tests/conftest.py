"""Settings for the whole test run.

The suite runs on pytest-xdist workers (``-n auto --dist loadfile`` in pyproject.toml): one per core, at most
four, each taking whole files so a module's launched job (a module-scoped fixture) is shared by its tests; the
files of one group (``SAME_WORKER``) go to one worker, so they share a session fixture too (one Ray cluster).
Files are handed out longest first (``LONGEST_FIRST``, then the rest in collection order), so no worker is left
with a long file at the end while the others idle. ``-n 0`` runs it in one process.

``--max-worker-restart=0``: a worker process that dies (a test killed it) ends the run, naming the test. With
restarts, xdist 3.8's file scheduler re-queues the dead worker's file and can wait forever for it (seen in CI).
"""

from __future__ import annotations

import os

import pytest

from tests import forked_programs  # stdlib and plugins.launchers.forkserver only: nothing heavy at collection

MAX_WORKERS = 4
SAME_WORKER = {"tests/distributed/test_launcher_ray.py": "ray", "tests/distributed/test_ray_failures.py": "ray"}
# the files with the most test time (a run's junit times, 2026-11-27), longest first; the one long test of
# test_precision.py (bf16 on a CPU without bf16 kernels, ~110 s) and test_example_main.py start at once
LONGEST_FIRST = (
    "tests/plugins/test_precision.py", "tests/trainer/test_benchmarks_smoke.py",
    "tests/distributed/test_ray_failures.py", "tests/distributed/test_launcher_ray.py",
    "tests/trainer/test_example_main.py", "tests/compat/test_loggers_diff.py", "tests/distributed/test_pipeline.py",
    "tests/distributed/test_ddp.py", "tests/distributed/test_fsdp.py", "tests/compat/test_lightning_cli.py",
    "tests/distributed/test_deepspeed.py", "tests/distributed/test_launcher_spark.py",
    "tests/plugins/test_forkserver.py", "tests/distributed/test_horovod.py", "tests/compat/test_tuner_diff.py",
    "tests/compat/test_lightning_compat.py", "tests/compat/test_fabric_programs.py", "tests/trainer/test_cli_runs.py",
    "tests/distributed/test_elastic_membership.py", "tests/trainer/test_async_checkpoint_kill.py",
    "tests/trainer/test_module_members.py", "tests/distributed/test_ddp_spawn.py",
)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: no error where xdist is not installed
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
    forked_programs.install()  # after OMP_NUM_THREADS: the warm interpreter starts with this environment


def pytest_unconfigure(config) -> None:  # noqa: ANN001
    forked_programs.uninstall()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001, ANN201
    """A test marked ``fresh_python`` (and its fixtures) starts its programs with exec. Variables read at import
    (``forked_programs.IMPORT_TIME``) are as before the test afterwards: code run in-process may set some (Relay's
    DeepSpeed strategy sets ``TORCH_EXTENSIONS_DIR``), and every later program would then need another warm
    interpreter."""
    fresh = item.get_closest_marker("fresh_python") is not None
    forked_programs.POOL.paused = fresh
    before = {k: v for k, v in os.environ.items() if k.startswith(forked_programs.IMPORT_TIME)}
    try:
        return (yield)
    finally:
        forked_programs.POOL.paused = False
        for name in [k for k in os.environ if k.startswith(forked_programs.IMPORT_TIME) and k not in before]:
            del os.environ[name]
        os.environ.update(before)


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001
    """The longest files first (a stable sort: each file's tests keep their order)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # noqa: ANN001, ANN201
    """``--dist loadfile`` with the ``SAME_WORKER`` groups, in collection order (see the module docstring)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return SAME_WORKER.get(file, file)

    config.option.loadscopereorder = False  # the order pytest_collection_modifyitems chose
    return GroupedFiles(config, log)
