"""Starting and joining the worker processes, for both front ends (the Trainer and Fabric; part of the one layer
between them and the plugins, ``trainer/distributed/strategy.py``).

A spawning launcher (``ddp_spawn``) runs a function in every worker and hands rank 0's result back. For a
multi-process run started with plain ``python``:
Like torchrun, the workers run this very program again (same interpreter, options and arguments);
the Trainer in each worker sees the torch elastic variables and joins the group instead of launching.
The launching process waits and then exits with the group's exit code, so code after ``fit()`` runs
in the workers, exactly as under ``torchrun --nproc-per-node=N script.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plugins.environments.torchelastic import TorchElasticEnvironment
from trainer.distributed.ranks import set_rank_zero_only
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from plugins.launchers.base import Launcher
    from plugins.strategies.base import Strategy
    from trainer.fabric.fabric import Fabric
    from trainer.trainer import Trainer

_NOT_RERUNNABLE = ("pytest", "_pytest", "ipykernel", "IPython", "jupyter")


def rerun_command() -> list[str]:
    """The command line that runs this program again, interpreter options included."""
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    origin = (spec.name if spec is not None else "") or (main_file or "")
    if not main_file or any(part in origin.replace(os.sep, ".").split(".") for part in _NOT_RERUNNABLE):
        raise MisconfigurationError(
            "A multi-process run (e.g. strategy='ddp', devices=2) starts its workers by running this program "
            "again, which is not possible from an interactive session, a notebook or a test runner. Put the code "
            "in a script and run `python script.py`, or start the processes yourself: "
            "`torchrun --nproc-per-node=2 script.py`."
        )
    argv = list(getattr(sys, "orig_argv", []))
    if len(argv) >= 2:
        return [sys.executable, *argv[1:]]
    if spec is not None and spec.name:
        return [sys.executable, "-m", spec.name.removesuffix(".__main__"), *sys.argv[1:]]
    return [sys.executable, os.path.abspath(main_file), *sys.argv[1:]]


def launch_workers_and_exit(launcher: Launcher) -> None:
    """Run the program in every worker, then end this process with the group's exit code."""
    code = launcher.launch(rerun_command())
    raise SystemExit(code)


def watch_launcher() -> None:
    """In a worker Relay's launcher started: die with the launcher (see ``plugins.launchers.elastic``).

    In any worker of an elastic agent (Relay's or torchrun's), an uncaught error is recorded for the agent, so
    the launcher's last line says what failed."""
    watched, recorded = os.environ.get("RELAY_LAUNCHER_PID"), os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not (watched or recorded):
        return
    from plugins.launchers import in_worker  # local import: only a launched worker loads the launcher's side

    if watched:
        in_worker.watch_launcher()
    if recorded:
        in_worker.record_failures()


def start_processes(strategy: Strategy, function: Callable[..., object] | None, args: tuple[object, ...],
                    carrier: Trainer | Fabric, join: bool = True) -> tuple[bool, Any]:
    """Start the workers when this process must (``(True, rank 0's result)``), else ``(False, None)``.

    A re-running launcher (plain ``python script.py`` with several processes) runs the program again in
    every worker and ends this process with the group's exit code, as torchrun would. A spawning launcher
    (``ddp_spawn``) runs ``function(carrier, *args)`` in every worker (``carrier.strategy`` is the strategy) and
    hands rank 0's result back; with ``join`` the worker joins the group first, else ``function`` joins it
    (``join_processes``) when its own start-up allows (the Trainer plans the call first).
    """
    launcher = getattr(strategy, "launcher", None)
    if launcher is None:
        return False, None
    if hasattr(launcher, "launch_function"):
        environment, strategy.environment = strategy.environment, None  # holds os.environ: not picklable
        try:
            return True, launcher.launch_function(_spawned, carrier, function, args, join)
        finally:
            strategy.environment = environment
    launch_workers_and_exit(launcher)
    return True, None  # not reached


def spawn_function(launcher: Any, function: Callable[..., object], *args: object) -> Any:
    """Run ``function(*args)`` in the processes a spawning launcher starts; rank 0's result comes back (for a
    launcher not held by a strategy: Lightning's ``_MultiProcessingLauncher`` in the zero-edit mode)."""
    return launcher.launch_function(function, *args)


def _spawned(carrier: Trainer | Fabric, function: Callable[..., object], args: tuple[object, ...], join: bool) -> object:
    carrier.strategy.environment = TorchElasticEnvironment()  # the spawn launcher set torchrun's variables
    if join:
        join_processes(carrier.strategy)
    return function(carrier, *args)


def join_processes(strategy: Strategy, begin: bool = True) -> None:
    """In a worker (or the only process): die with Relay's launcher, join the group, select the device; with
    ``begin``, start-up is over at once (collectives wait at most the strategy's ``timeout`` from here on), else
    the caller calls ``strategy.begin_training()`` once its own start-up (loading a checkpoint) is done."""
    watch_launcher()
    strategy.setup_environment()
    set_rank_zero_only(strategy.global_rank)
    if begin:
        strategy.begin_training()
