"""Starting the worker processes for a multi-process run started with plain ``python``.

Like torchrun, the workers run this very program again (same interpreter, options and arguments);
the Trainer in each worker sees the torch elastic variables and joins the group instead of launching.
The launching process waits and then exits with the group's exit code, so code after ``fit()`` runs
in the workers, exactly as under ``torchrun --nproc-per-node=N script.py``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from plugins.launchers.in_worker import record_failures
from plugins.launchers.in_worker import watch_launcher as watch
from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from plugins.launchers.base import Launcher

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
    if os.environ.get("RELAY_LAUNCHER_PID"):
        watch()
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):
        record_failures()
