"""Starting local worker processes when no external launcher (torchrun, srun, mpirun) did.

Launchers are built on ``torch.distributed.elastic`` (see the DDP work); they never rendezvous or
communicate on their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Launcher:
    """Runs ``function(*args)`` in every worker process and returns rank 0's result."""

    @property
    def is_interactive_compatible(self) -> bool:
        """Whether it works from a notebook (no re-import of ``__main__``)."""
        return False

    def launch(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
