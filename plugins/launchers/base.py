"""Starting worker processes when no external launcher (torchrun, srun, mpirun) did.

Two kinds: ``Launcher`` runs a command in fresh worker processes (``plugins/launchers/elastic.py``, on
``torch.distributed.elastic``); ``FunctionLauncher`` hands a function to an engine that starts and owns
its workers (Ray Train, Spark's ``TorchDistributor``). Neither rendezvous nor communicates on its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any


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


@contextlib.contextmanager
def workers_environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's variables plus ``env`` for the launch, as before after it: the launch's forkserver imports
    torch under the workers' variables, and the workers inherit them."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class RankFailedError(RuntimeError):
    """A worker of a function launcher failed; the message is Relay's one line naming the rank."""

    def __init__(self, rank: int | None, reason: str, processes: int) -> None:
        self.rank, self.reason = rank, reason
        others = "the other rank was stopped" if processes == 2 else "the other ranks were stopped"
        who = f"rank {rank}" if rank is not None else "a worker"
        super().__init__(f"relay: {who} failed ({reason}); {others} (its traceback is above).")


class FunctionLauncher:
    """An engine that starts ``processes`` workers itself and calls ``entry(*args)`` in each.

    The entry is passed by reference (a module-level function, pickled by name), so the workers must be
    able to import it: ``env`` carries ``PYTHONPATH``. Rank 0's return value comes back (a mapping with
    ``metrics`` and ``checkpoint`` for the engines that track them); a failure raises ``RankFailedError``.
    """

    name = ""

    def run(
        self, entry: Callable[..., Any], args: tuple[Any, ...], processes: int, use_gpu: bool,
        env: Mapping[str, str] | None = None,
    ) -> Any:
        raise NotImplementedError


def first_line(error: BaseException | str) -> str:
    """``Type: first line of the message``, short enough for a one-line report."""
    if isinstance(error, str):
        text = error.strip().splitlines()
        return text[-1][:300] if text else "no message"
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0][:300]}" if message else type(error).__name__


PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "Socket closed",
             "Horovod has been shut down")


def is_peer_failure(text: str) -> bool:
    """Whether an error only says that another rank went away (gloo/NCCL), not what went wrong."""
    return any(marker in text for marker in PEER_GONE)
