"""Running Relay's entry point in Ray Train workers (``ray.train.torch.TorchTrainer``).

Ray starts the workers (``ScalingConfig(num_workers=N, use_gpu=...)``), sets their rank variables and
initialises the process group; ``RayEnvironment`` recognises them and the strategy joins Ray's group.
Rank 0's final metrics and newest checkpoint are reported to Ray (``ray.train.report``), so the run
shows up in Ray's results like any Ray Train run. Details that matter in practice:

- every run gets a unique name: Ray Train restores a previous run's state for a reused name;
- every checkpoint Relay saves is reported to Ray when written; with ``max_failures=N`` a failed worker group
  is restarted by Ray and continues from the newest of them (exactly, as ``ckpt_path`` would);
- a failing worker (``WorkerGroupError``) becomes Relay's one line "rank N failed (...)", naming the
  rank whose own error is not just the lost connection to a peer;
- the console shows what the training workers print (Relay's progress and results); the controller's
  and Ray's own chatter go to Ray's log files (``quiet=False`` shows everything, as Ray would).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from plugins.launchers.base import FunctionLauncher, RankFailedError, first_line, is_peer_failure

_RAY_TRAIN_CHATTER = ("Setting up process group for", "Reporting training result", "Error in training function",
                      "Checkpoint successfully created")
# Ray Train V2 copies each print() of a worker into its own log stream too: the console would show it twice
_WORKER_ENV = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0"}


ELASTIC_ENV = "RELAY_RAY_ELASTIC"  # set in the workers of an elastic run: Ray picks the worker count


def unique_run_name() -> str:
    return f"relay-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


class RayLauncher(FunctionLauncher):
    """``N`` Ray Train workers; connects to ``address`` (or ``RAY_ADDRESS``), else starts a local Ray."""

    name = "ray"

    def __init__(
        self, address: str | None = None, resources_per_worker: dict[str, float] | None = None,
        storage_path: str | None = None, max_failures: int = 0, quiet: bool = True, min_workers: int | None = None,
    ) -> None:
        """``min_workers``: elastic worker count (Ray's ``ScalingConfig(num_workers=(min, max))``, max being
        ``trainer.devices x trainer.num_nodes``): Ray starts, and restarts after a failure, with as many workers
        as the cluster fits, at least this many; each start resumes from the newest checkpoint reported."""
        if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < -1:
            raise ValueError(f"RayLauncher(max_failures={max_failures!r}) must be an int >= -1 (-1: retry forever).")
        if min_workers is not None and (isinstance(min_workers, bool) or not isinstance(min_workers, int)
                                        or min_workers < 1):
            raise ValueError(f"RayLauncher(min_workers={min_workers!r}) must be an int >= 1, or null for a fixed "
                             "count, e.g. launcher.min_workers=1.")
        self.min_workers = min_workers
        self.address = address
        self.resources_per_worker = dict(resources_per_worker) if resources_per_worker else None
        self.storage_path = storage_path
        self.max_failures = max_failures
        self.quiet = quiet

    def run(
        self, entry: Callable[..., Any], args: tuple[Any, ...], processes: int, use_gpu: bool,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Rank 0's ``{"metrics": ..., "checkpoint": <path in Ray's storage>}``; raises ``RankFailedError``."""
        ray = _import_ray()
        from ray.train import FailureConfig, RunConfig, ScalingConfig, TrainingFailedError
        from ray.train.torch import TorchTrainer

        workers: int | tuple[int, int] = processes
        env = dict(env or {})
        if self.min_workers is not None:
            if self.min_workers > processes:
                raise ValueError(f"RayLauncher(min_workers={self.min_workers}) is more than the {processes} workers "
                                 f"asked for (trainer.devices x trainer.num_nodes); use min_workers<={processes}.")
            workers = (self.min_workers, processes)
            env[ELASTIC_ENV] = "1"  # the workers accept the count Ray chose
        started = not ray.is_initialized()
        if started:
            ray.init(address=self.address, include_dashboard=False, configure_logging=True,
                     logging_level=logging.ERROR if self.quiet else logging.INFO)
        if self.quiet:
            show_only_training_workers()
        storage = Path(self.storage_path or Path.cwd() / "ray").expanduser().resolve()
        trainer = TorchTrainer(
            _ray_worker, train_loop_config={"entry": entry, "args": tuple(args)},
            scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu,
                                         resources_per_worker=self.resources_per_worker),
            run_config=RunConfig(
                name=unique_run_name(), storage_path=str(storage),
                worker_runtime_env={"env_vars": {**_WORKER_ENV, **env}},
                failure_config=FailureConfig(max_failures=self.max_failures),
            ),
        )
        try:
            result = trainer.fit()
        except TrainingFailedError as err:
            rank, reason = failing_rank(getattr(err, "worker_failures", None) or {}, err)
            raise RankFailedError(rank, reason, processes) from None
        finally:
            if started:
                ray.shutdown()
        checkpoint = result.checkpoint.path if result.checkpoint is not None else None
        return {"metrics": dict(result.metrics or {}), "checkpoint": checkpoint, "ray_path": result.path}


def _import_ray() -> Any:
    try:
        import ray
        import ray.train.torch  # noqa: F401
    except ImportError:
        raise ValueError(
            "launcher=ray needs Ray Train, which is not installed: pip install 'relaytrain[ray]' "
            "(or pip install 'ray[train]')."
        ) from None
    return ray


def failing_rank(failures: Mapping[int, BaseException], error: BaseException) -> tuple[int | None, str]:
    """The rank that failed first on its own (not because a peer vanished), and its error in one line."""
    if not failures:
        return None, first_line(error)
    ranks = sorted(failures)
    own = [r for r in ranks if not is_peer_failure(str(failures[r]))]
    rank = (own or ranks)[0]
    return rank, _last_line(failures[rank])


def _last_line(error: BaseException) -> str:
    """``Type: message`` of a worker's error (Ray may hand over its traceback text instead of the exception)."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Traceback"):
        return lines[-1].strip()[:300]
    return first_line(error)


def _ray_worker(config: dict[str, Any]) -> None:
    """Runs in every Ray Train worker: Relay's entry, then rank 0's metrics and checkpoint to Ray.

    Each checkpoint Relay saves is reported to Ray as it is written (``on_checkpoint``), so when a worker
    dies and ``FailureConfig(max_failures=N)`` restarts the group, the new attempt resumes from the newest
    one (``resume_from``: Ray's ``get_checkpoint()``, fetched to a local folder).
    """
    result = config["entry"](*config["args"], resume_from=restored_checkpoint(), on_checkpoint=report_checkpoint)
    result = result if isinstance(result, Mapping) else {}
    metrics = {k: float(v) for k, v in dict(result.get("metrics") or {}).items()}
    report_checkpoint(result.get("checkpoint"), metrics)


def restored_checkpoint() -> str | None:
    """The newest checkpoint an earlier attempt of this run reported to Ray, as a local path (None: a first start)."""
    import tempfile

    import ray.train

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return None
    folder = tempfile.mkdtemp(prefix="relay-restored-")
    checkpoint.to_directory(folder)
    entries = os.listdir(folder)
    if len(entries) == 1 and os.path.isfile(os.path.join(folder, entries[0])):
        return os.path.join(folder, entries[0])  # a file checkpoint, reported inside a folder
    return folder  # a sharded / DeepSpeed checkpoint is the folder itself


def report_checkpoint(path: str | None, metrics: Mapping[str, float] | None = None) -> None:
    """Every rank calls this at the same point (Ray Train counts each rank's reports); rank 0's checkpoint
    (a file or a sharded directory) becomes a Ray ``Checkpoint``."""
    import shutil
    import tempfile

    import ray.train

    metrics = dict(metrics or {})
    if ray.train.get_context().get_world_rank() != 0 or not path or not os.path.exists(path):
        ray.train.report(metrics)
        return
    if os.path.isdir(path):
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(path))
        return
    with tempfile.TemporaryDirectory(prefix="relay-ckpt-") as folder:  # Ray checkpoints are directories
        target = os.path.join(folder, os.path.basename(path))
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))


def show_only_training_workers() -> None:
    """Forward what the training workers print, unprefixed; drop the controller's and Ray's own lines.

    Uses Ray's log dispatcher (a private API): where it is missing, Ray's default output stays.
    """
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return

    def forward(data: dict[str, Any]) -> None:
        if "RayTrainWorker" not in str(data.get("actor_name") or ""):
            return
        lines = [line for line in data.get("lines", []) if not line.lstrip().startswith(_RAY_TRAIN_CHATTER)]
        if lines:
            stream = sys.stderr if data.get("is_err") else sys.stdout
            print("\n".join(lines), file=stream, flush=True)

    dispatcher.remove_handler("ray_print_logs")
    dispatcher.remove_handler("relay_print_logs")
    dispatcher.add_handler("relay_print_logs", forward)
