"""Starting local worker processes when no external launcher (torchrun, srun, mpirun) did.

Launchers are built on ``torch.distributed.elastic`` (``plugins/launchers/elastic.py``); they never
rendezvous or communicate on their own.
"""

from __future__ import annotations


class Launcher:
    """Runs a command in every worker process and returns the group's exit code.

    A command, not a function: workers start as fresh programs (as under torchrun), so nothing has to be
    pickled and a worker's imports match a normal run. ``env`` adds variables for the workers only.
    """

    @property
    def is_interactive_compatible(self) -> bool:
        """Whether it works from a notebook (no re-import of ``__main__``)."""
        return False

    def launch(self, command: list[str], env: dict[str, str] | None = None) -> int:
        raise NotImplementedError
