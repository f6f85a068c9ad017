"""Lightning's Trainer launchers (``lightning.pytorch.strategies.launchers``), as Relay's launchers.

Rule 2 of ``impl/loops_progress.py``'s docstring: Relay has the counterparts. ``_MultiProcessingLauncher`` is
Relay's ``SpawnLauncher`` (``ddp_spawn``/``ddp_notebook`` start workers with ``torch.multiprocessing`` and hand rank
0's result back) and ``_SubprocessScriptLauncher`` stands for Relay's ``ElasticLauncher`` (``ddp`` from a plain
``python script.py``: the script runs again in each worker). Each is a small adapter taking Lightning's constructor
arguments, and ``isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)`` holds for the launcher Relay's
strategy made (a ``SpawnLauncher``), as it does on Lightning. ``_GlobalStateSnapshot`` and ``_WorkerOutput`` are
rule 1 (small, defined behaviour).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, TypeVar

import torch
import torch.multiprocessing as mp
from lightning_utilities import apply_to_collection

from plugins.launchers.elastic import ElasticLauncher
from plugins.launchers.spawn import SpawnLauncher
from trainer.lightning_compat.impl.loops_objects import _AlsoRelays
from trainer.lightning_compat.impl.utilities import _collect_rng_states, _set_rng_states

_T = TypeVar("_T")

if TYPE_CHECKING:
    from plugins.environments.base import ClusterEnvironment
    from trainer.states import TrainerState
    from trainer.trainer import Trainer


class _Launcher(ABC):
    """Lightning's launcher interface: ``launch(function, *args, **kwargs)``, ``kill(signum)``."""

    @property
    @abstractmethod
    def is_interactive_compatible(self) -> bool:
        """Whether it works from a notebook."""

    @abstractmethod
    def launch(self, function: Callable, *args: Any, **kwargs: Any) -> Any:
        """Start the processes and run ``function`` in them."""

    @abstractmethod
    def kill(self, signum: int) -> None:
        """Send ``signum`` to the processes it started."""


@dataclass
class _GlobalStateSnapshot:
    """Torch's deterministic flags, cuDNN benchmark and the RNG states, to carry into a spawned worker."""

    use_deterministic_algorithms: bool
    use_deterministic_algorithms_warn_only: bool
    cudnn_benchmark: bool
    rng_states: dict[str, Any]

    @classmethod
    def capture(cls) -> _GlobalStateSnapshot:
        return cls(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                   torch.backends.cudnn.benchmark, _collect_rng_states())

    def restore(self) -> None:
        torch.use_deterministic_algorithms(self.use_deterministic_algorithms,
                                           warn_only=self.use_deterministic_algorithms_warn_only)
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        _set_rng_states(self.rng_states)


class _WorkerOutput(NamedTuple):
    best_model_path: str | None
    weights_path: str | None
    trainer_state: TrainerState
    trainer_results: Any
    extra: dict[str, Any]


def _run_restored(strategy: Any, snapshot: _GlobalStateSnapshot | None, function: Callable[..., _T],
                  *args: object) -> _T:
    """In a worker: the launching process's global state back, the strategy's ranks from the variables the spawn
    launcher set (Lightning's ``_worker_setup``: the same strategy object the function is given), then ``function``."""
    if snapshot is not None:
        snapshot.restore()
    if strategy is not None and hasattr(strategy, "environment"):
        from plugins.environments.torchelastic import TorchElasticEnvironment  # local import: workers only
        from trainer.distributed.ranks import set_rank_zero_only  # local import: as above

        strategy.environment = TorchElasticEnvironment()
        set_rank_zero_only(strategy.global_rank)
    return function(*args)


class _MultiProcessingLauncher(SpawnLauncher, _Launcher, metaclass=_AlsoRelays):
    """Relay's ``SpawnLauncher`` built from a strategy: ``strategy.num_processes`` workers started with
    ``torch.multiprocessing`` (``start_method``), ``function`` run in each, rank 0's return value handed back."""

    _relay_counterpart = SpawnLauncher

    def __init__(self, strategy: Any, start_method: str = "spawn") -> None:
        self._strategy = strategy
        self._start_method = self.start_method = start_method
        if start_method not in mp.get_all_start_methods():
            raise ValueError(f"The start method '{start_method}' is not available on this platform. Available "
                             f"methods are: {', '.join(mp.get_all_start_methods())}")
        self.procs: list[mp.Process] = []
        self._already_fit = False

    # SpawnLauncher's settings, read from the strategy when the launch happens
    @property
    def nprocs(self) -> int:  # type: ignore[override]
        return int(self._strategy.num_processes)

    @property
    def main_address(self) -> str:  # type: ignore[override]
        environment = getattr(self._strategy, "cluster_environment", None)
        return getattr(environment, "main_address", None) or "127.0.0.1"

    @property
    def main_port(self) -> int | None:  # type: ignore[override]
        return int(os.environ["MASTER_PORT"]) if "MASTER_PORT" in os.environ else None

    def launch(self, function: Callable, *args: Any, trainer: Optional[Trainer] = None,  # type: ignore[override]
               **kwargs: Any) -> Any:
        """Run ``function(*args, **kwargs)`` in every worker; rank 0's return value. The spawned workers start with
        this process's deterministic flags and RNG states, as on Lightning."""
        if self._start_method in ("fork", "forkserver") and torch.cuda.is_available() and torch.cuda.is_initialized():
            raise RuntimeError(f"Cannot start processes with start_method={self._start_method!r} after CUDA was "
                               "initialized in this process; use start_method='spawn'.")
        snapshot = _GlobalStateSnapshot.capture() if self._start_method == "spawn" else None
        target = partial(function, **kwargs) if kwargs else function
        return self.launch_function(partial(_run_restored, self._strategy, snapshot, target), *args)

    def get_extra_results(self, trainer: Trainer) -> dict[str, Any]:
        """What a worker sends back besides the result: ``trainer.callback_metrics``, as bytes."""
        buffer = io.BytesIO()
        torch.save(apply_to_collection(dict(trainer.callback_metrics), torch.Tensor, lambda t: t.cpu()), buffer)
        return {"callback_metrics_bytes": buffer.getvalue()}

    def update_main_process_results(self, trainer: Trainer, extra: dict[str, Any]) -> None:
        metrics = torch.load(io.BytesIO(extra["callback_metrics_bytes"]), weights_only=True)
        trainer.callback_metrics.update(metrics)

    def kill(self, signum: int) -> None:
        for proc in self.procs:
            if proc.is_alive() and proc.pid is not None:
                try:
                    os.kill(proc.pid, signum)
                except ProcessLookupError:
                    pass

    def __getstate__(self) -> dict:
        return {**self.__dict__, "procs": []}


def _script_command() -> list[str]:
    """The command that started this program (``python script.py args`` or ``python -m package args``)."""
    import __main__

    spec = getattr(__main__, "__spec__", None)
    if spec is None:
        return [sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]]
    return [sys.executable, "-m", spec.name, *sys.argv[1:]]


class _SubprocessScriptLauncher(ElasticLauncher, _Launcher, metaclass=_AlsoRelays):
    """Lightning's script launcher over Relay's: unless the cluster environment started the processes, the script
    runs again for local ranks ``1..num_processes-1`` (``LOCAL_RANK`` set), then ``function`` runs here as local rank
    0. Relay's own Trainer starts its workers with ``ElasticLauncher`` (torch elastic) instead."""

    _relay_counterpart = ElasticLauncher

    def __init__(self, cluster_environment: ClusterEnvironment, num_processes: int, num_nodes: int) -> None:
        self.cluster_environment = cluster_environment
        self.num_processes = num_processes
        self.num_nodes = num_nodes
        self.procs: list[subprocess.Popen] = []
        self.max_restarts, self.shutdown_timeout, self.monitor_interval = 0, 30, 0.1

    @property
    def nprocs(self) -> int:  # type: ignore[override]
        return self.num_processes

    @property
    def main_address(self) -> str:  # type: ignore[override]
        return self.cluster_environment.main_address

    @property
    def main_port(self) -> int:  # type: ignore[override]
        return self.cluster_environment.main_port

    @property
    def is_interactive_compatible(self) -> bool:
        return False

    def launch(self, function: Callable, *args: Any, trainer: Optional[Trainer] = None,  # type: ignore[override]
               **kwargs: Any) -> Any:
        validate = getattr(self.cluster_environment, "validate_settings", None)
        if validate is not None:
            validate(num_devices=self.num_processes, num_nodes=self.num_nodes)
        if not self.cluster_environment.creates_processes_externally:
            self._call_children_scripts()
        return function(*args, **kwargs)

    def _call_children_scripts(self) -> None:
        if self.cluster_environment.local_rank() != 0:
            raise RuntimeError("Lightning attempted to launch new distributed processes with `local_rank > 0`. This "
                               "should not happen. Possible reasons: 1) LOCAL_RANK environment variable was incorrectly "
                               "modified by the user, 2) `ClusterEnvironment.creates_processes_externally` incorrectly "
                               "implemented.")
        self.procs = []
        environment = self.cluster_environment
        os.environ.update({"MASTER_ADDR": environment.main_address, "MASTER_PORT": str(environment.main_port),
                           "NODE_RANK": str(environment.node_rank()), "LOCAL_RANK": str(environment.local_rank()),
                           "WORLD_SIZE": str(self.num_processes * self.num_nodes)})
        for local_rank in range(1, self.num_processes):
            env = {**os.environ, "LOCAL_RANK": str(local_rank)}
            self.procs.append(subprocess.Popen(_script_command(), env=env))

    def kill(self, signum: int) -> None:
        for proc in self.procs:
            proc.send_signal(signum)


__all__ = ["_GlobalStateSnapshot", "_Launcher", "_MultiProcessingLauncher", "_SubprocessScriptLauncher",
           "_WorkerOutput"]
