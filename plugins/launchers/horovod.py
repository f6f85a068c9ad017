"""Starting Horovod workers on this machine with Horovod's own launcher, as ``horovodrun`` would.

``Trainer(strategy="horovod", devices=2)`` in a plain ``python train.py`` runs
``horovodrun -np 2 --gloo -H localhost:2 <this program again>``: the workers see ``HOROVOD_RANK`` & co.,
detect the MPI environment and never launch again. horovodrun stops the other workers when one fails
and exits non-zero; each worker's output comes back prefixed with its rank.

The workers are forked from the launch's forkserver (``plugins/launchers/forkserver.py``) where the command allows
it: horovodrun's shell starts ``orphan_guard.py``, which stands in for the forked worker (signals, exit status), so
each worker skips Python's start-up and ``import torch``, as under Relay's own launcher.
"""

from __future__ import annotations

import os
import subprocess
import sys

from plugins.launchers.base import Launcher, workers_environment
from plugins.launchers.forkserver import GUARD, worker_forkserver

# horovodrun's entry point, run with this interpreter (no reliance on PATH); its own "a process failed"
# RuntimeError becomes one line, since the failing worker's traceback is already printed above it
_HOROVODRUN = (
    "import sys\nfrom horovod.runner.launch import run_commandline\ntry:\n    run_commandline()\n"
    "except RuntimeError as err:\n    print('horovodrun: ' + ' '.join(str(err).split()), file=sys.stderr)\n"
    "    sys.exit(1)"
)


# horovodrun --gloo first asks whether Horovod has Gloo, in a forked child that imports a framework (tensorflow, then
# torch): ~2.5 CPU-seconds and seconds of waiting per launch. Where this process has the answer, horovodrun is given it
_GLOO_BUILT = "import horovod.runner.launch\nhorovod.runner.launch.gloo_built = lambda verbose=False: True\n"


def horovodrun_command(nprocs: int, command: list[str], hosts: str | None = None) -> list[str]:
    """``horovodrun -np N --gloo -H localhost:N`` followed by ``command``, as an argument list."""
    script = _GLOO_BUILT + _HOROVODRUN if gloo_built_here() else _HOROVODRUN
    return [sys.executable, "-c", script, "-np", str(nprocs), "--gloo", "-H", hosts or f"localhost:{nprocs}",
            *command]


def gloo_built_here() -> bool:
    """Whether this Python's Horovod has Gloo, asked in this process where it has imported torch already (Horovod's
    torch extension then loads in ~0.05 s). False (horovodrun asks itself, as before) where torch is not imported here
    or the extension does not load."""
    if "torch" not in sys.modules:
        return False
    try:
        import horovod.torch
    except Exception:  # noqa: BLE001 (not installed, or an extension that does not load: horovodrun says which)
        return False
    return bool(horovod.torch.gloo_built())


class HorovodLauncher(Launcher):
    """``nprocs`` Horovod workers on this node through horovodrun (gloo controller)."""

    def __init__(self, nprocs: int, num_nodes: int = 1) -> None:
        if nprocs < 1:
            raise ValueError(f"nprocs={nprocs} must be >= 1.")
        if num_nodes != 1:
            raise ValueError(
                f"Trainer(strategy='horovod', num_nodes={num_nodes}): Relay starts Horovod workers on this machine only; "
                f"start them on every host yourself, e.g. `horovodrun -np {nprocs * num_nodes} "
                f"-H host1:{nprocs},host2:{nprocs} python train.py`."
            )
        self.nprocs = nprocs

    def launch(self, command: list[str], env: dict[str, str] | None = None) -> int:
        with workers_environment(env or {}), worker_forkserver(command) as forkserver:
            # the stand-in's parent is horovodrun's shell, not this process ("0")
            workers = [*GUARD, "0", *forkserver.guard_args, *command] if forkserver.guard_args else command
            done = subprocess.run(horovodrun_command(self.nprocs, workers))
        if done.returncode != 0:
            print(f"relay: horovodrun exited with code {done.returncode}; the failing rank's traceback is above "
                  "(lines prefixed [rank]).", file=sys.stderr, flush=True)
        return done.returncode
