"""Lightning Fabric's process launchers (``lightning.fabric.strategies.launchers``): the launcher interface, the
multiprocessing launcher as an adapter on Relay's ``SpawnLauncher``, and the launchers' small helpers.

``_MultiProcessingLauncher(strategy, start_method).launch(function, *args, **kwargs)`` runs ``function`` in
``strategy.num_processes`` new processes started by Relay's spawn launcher (``plugins/launchers/spawn.py``), which
sets torchrun's variables in each (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``:
Lightning sets ``LOCAL_RANK`` only), stops the others when one fails and raises its error here; rank 0's return value
(moved to the CPU) is returned, as in Lightning. With "spawn", the global torch state (deterministic flags,
``cudnn.benchmark``, the random generators) is restored in each worker and CPU modules among the arguments stop
sharing memory between processes.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter: here);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import itertools
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from textwrap import dedent
from typing import TYPE_CHECKING, Any

import torch
import torch.multiprocessing as mp
from lightning_utilities import apply_to_collection

from plugins.accelerators.cpu import CPUAccelerator
from plugins.launchers.spawn import SpawnLauncher
from trainer.lightning_compat.impl.fabric_precision import _GlobalStateSnapshot
from trainer.lightning_compat.impl.utilities import _set_num_threads_if_needed
from trainer.utilities.data import move_data_to_device
from trainer.distributed.launch import spawn_function

if TYPE_CHECKING:
    from plugins.strategies.parallel import ParallelStrategy

_IS_INTERACTIVE = hasattr(sys, "ps1") or bool(sys.flags.interactive)


class _Launcher(ABC):
    """Lightning's launcher interface: starts the processes a strategy runs in."""

    @property
    @abstractmethod
    def is_interactive_compatible(self) -> bool:
        """Whether it works in a notebook."""

    @abstractmethod
    def launch(self, function: Callable, *args: Any, **kwargs: Any) -> Any:
        """Start the processes and run ``function`` in them."""


def _check_bad_cuda_fork() -> None:
    """``RuntimeError`` when forking now would break CUDA in the children (a CUDA context exists here)."""
    bad_fork = getattr(torch.cuda, "_is_in_bad_fork", None)
    if callable(bad_fork):
        broken = bad_fork()
        message = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                   "you must use the 'spawn' start method or avoid CUDA initialization in the main process.")
    else:
        broken = torch.cuda.is_initialized()
        message = ("Lightning can't create new processes if CUDA is already initialized. Did you manually call"
                   " `torch.cuda.*` functions, have moved the model to the device, or allocated memory on the GPU any"
                   " other way? Please remove any such calls, or change the selected strategy.")
    if broken:
        raise RuntimeError(message + (" You will have to restart the Python kernel." if _IS_INTERACTIVE else ""))


def _check_missing_main_guard() -> None:
    """``RuntimeError`` in a spawned child that is re-running the launching script (no ``__main__`` guard)."""
    if not getattr(mp.current_process(), "_inheriting", False):
        return
    raise RuntimeError(dedent(
        """
        Launching multiple processes with the 'spawn' start method requires that your script guards the main
        function with an `if __name__ == \"__main__\"` clause. For example:

        def main():
            # Put your code here
            ...

        if __name__ == "__main__":
            main()

        Alternatively, you can run with `strategy="ddp"` to avoid this error.
        """
    ))


def _disable_module_memory_sharing(data: Any) -> Any:
    """``data`` with the parameters and buffers of every module in it copied, so that tensors passed to spawned
    processes (which torch shares between them) are each process's own."""

    @torch.no_grad()
    def unshare(module: torch.nn.Module) -> torch.nn.Module:
        for tensor in itertools.chain(module.parameters(), module.buffers()):
            tensor.data = tensor.data.clone()
        return module

    return apply_to_collection(data, function=unshare, dtype=torch.nn.Module)


def _basic_subprocess_cmd() -> Sequence[str]:
    """The command that started this program (``python script.py args`` or ``python -m module args``)."""
    import __main__

    if __main__.__spec__ is None:
        return [sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]]
    return [sys.executable, "-m", __main__.__spec__.name, *sys.argv[1:]]


def _hydra_subprocess_cmd(local_rank: int) -> tuple[Sequence[str], str]:
    """The command that started this Hydra program, with the run directory kept and no second config output for
    worker ``local_rank``; and the directory it was started from."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_original_cwd, to_absolute_path

    import __main__

    if __main__.__spec__ is None:
        command = [sys.executable, to_absolute_path(sys.argv[0])]
    else:
        command = [sys.executable, "-m", __main__.__spec__.name]
    command += sys.argv[1:]
    command += [f'hydra.run.dir="{HydraConfig.get().run.dir}"', f"hydra.job.name=train_ddp_process_{local_rank}",
                "hydra.output_subdir=null"]
    return command, get_original_cwd()


def _run_launched(function: Callable, args: tuple, kwargs: dict[str, object], snapshot: _GlobalStateSnapshot | None,
                  unshare: bool,
                  num_processes: int) -> Any:
    """In each worker: the launching process's global state, own copies of CPU modules, then ``function``."""

    if snapshot is not None:
        snapshot.restore()
    if unshare:
        args, kwargs = _disable_module_memory_sharing((args, kwargs))
    _set_num_threads_if_needed(num_processes=num_processes)
    return move_data_to_device(function(*args, **kwargs), "cpu")


class _MultiProcessingLauncher(_Launcher):
    """Runs a function in ``strategy.num_processes`` new local processes (Relay's ``SpawnLauncher``) and returns
    rank 0's result; see the module's docstring."""

    def __init__(self, strategy: ParallelStrategy, start_method: str = "spawn") -> None:
        self._strategy = strategy
        self._start_method = start_method
        if start_method not in mp.get_all_start_methods():
            raise ValueError(f"The start method '{self._start_method}' is not available on this platform. Available "
                             f"methods are: {', '.join(mp.get_all_start_methods())}")

    @property
    def is_interactive_compatible(self) -> bool:
        return self._start_method == "fork"

    def _num_processes(self) -> int:
        strategy = self._strategy
        count = getattr(strategy, "num_processes", None)
        if count is None:
            devices = getattr(strategy, "parallel_devices", None) or getattr(strategy, "device_ids", None)
            count = len(devices) if devices else 1
        return int(count)

    def launch(self, function: Callable, *args: Any, **kwargs: Any) -> Any:

        if self._start_method in ("fork", "forkserver"):
            _check_bad_cuda_fork()
        if self._start_method == "spawn":
            _check_missing_main_guard()
        environment = getattr(self._strategy, "cluster_environment", None) or getattr(self._strategy, "environment",
                                                                                    None)
        port = int(environment.main_port) if environment is not None else None
        if port is not None:
            os.environ["MASTER_PORT"] = str(port)  # every rank meets on the port chosen here
        address = getattr(environment, "main_address", None) or "127.0.0.1"
        spawn = self._start_method == "spawn"
        snapshot = _GlobalStateSnapshot.capture() if spawn else None
        unshare = spawn and isinstance(getattr(self._strategy, "accelerator", None), CPUAccelerator)
        count = self._num_processes()
        launcher = SpawnLauncher(count, start_method=self._start_method, main_address=address, main_port=port)
        return spawn_function(launcher, _run_launched, function, args, kwargs, snapshot, unshare, count)
