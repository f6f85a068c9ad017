"""Who am I and where is rank 0: the one thing the Trainer needs from whoever started this process.

An environment only reads what a launcher (torchrun, srun, mpirun, the Kubeflow operator) put in the
process environment. It never starts processes and never writes to ``os.environ``: the strategy
decides how to use the address, port and ranks it reports.
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any


log = logging.getLogger(__name__)


def environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    """``env`` or, when it is None, the real process environment (read live, never copied)."""
    return os.environ if env is None else env


class MissingVariableError(ValueError, KeyError):
    """A variable the launcher sets is not set: a ``ValueError`` saying which and why, also a ``KeyError`` (what
    reading ``os.environ[name]`` raises, as Lightning's environments do)."""

    def __str__(self) -> str:
        return ValueError.__str__(self)


class ClusterEnvironment(ABC):
    """Ranks, world size and the rank-0 address, as one launcher reports them.

    Every subclass takes an explicit ``env`` mapping (default ``os.environ``) so that detection and
    the properties are pure functions of a dict, and tests never touch the real environment.
    """

    name: str = ""
    launcher: str = "the launcher"  # how error messages name whoever set the variables

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env: Mapping[str, str] = environ(env)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (``ddp_spawn`` sends the Trainer to its workers): the live process environment is not sent;
        the receiving process reads its own."""
        state = dict(self.__dict__)
        if state.get("env") is os.environ:
            state["env"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.env is None:
            self.env = os.environ

    @property
    @abstractmethod
    def creates_processes_externally(self) -> bool:
        """True when the launcher already started every process, so Relay must not launch any."""

    @property
    @abstractmethod
    def main_address(self) -> str:
        """Host of the rank-0 process, where the process group meets."""

    @property
    @abstractmethod
    def main_port(self) -> int:
        """Port on ``main_address``; every rank must get the same value."""

    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def global_rank(self) -> int: ...

    @abstractmethod
    def local_rank(self) -> int: ...

    @abstractmethod
    def node_rank(self) -> int: ...

    def num_nodes(self) -> int:
        """Nodes in the job (launchers that know better override this)."""
        return 1

    def local_world_size(self) -> int:
        """Processes on this node: what ``devices="auto"`` becomes under an external launcher."""
        return max(1, self.world_size() // max(1, self.num_nodes()))

    @staticmethod
    @abstractmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        """Whether this process was started by this environment's launcher."""

    def restart_count(self) -> int:
        """How many times the launcher restarted these workers (0: a first start). A restart is a resume: the
        Trainer then continues from the run's newest checkpoint without being told to."""
        return 0

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        """Raise ``ValueError`` when the Trainer's devices / num_nodes disagree with the launcher."""

    # Lightning's setters: the launcher owns the ranks of the processes it started, so these are ignored (logged)
    def set_world_size(self, size: int) -> None:
        log.debug(f"{type(self).__name__}.set_world_size was called, but setting world size is not allowed. Ignored.")

    def set_global_rank(self, rank: int) -> None:
        log.debug(f"{type(self).__name__}.set_global_rank was called, but setting global rank is not allowed. "
                  "Ignored.")

    def teardown(self) -> None:
        """Undo anything set up for the run; environments that only read variables have nothing to undo."""

    # --- helpers for subclasses -----------------------------------------------------------------
    def _str(self, *names: str) -> str:
        """The first of ``names`` that is set; a clear error naming the launcher when none is."""
        for name in names:
            if name in self.env:
                return self.env[name]
        raise self._missing(names)

    def _int(self, *names: str) -> int:
        """Like ``_str``, as an int; a clear error when the value is not a whole number."""
        for name in names:
            if name in self.env:
                return self._parse_int(name)
        raise self._missing(names)

    def _missing(self, names: tuple[str, ...]) -> ValueError:
        return MissingVariableError(
            f"{type(self).__name__} needs the environment variable {' or '.join(names)}, which {self.launcher} "
            "sets for every process it starts, but it is not set. Start the script with that launcher, or pick "
            "another environment."
        )

    def _optional_int(self, *names: str) -> int | None:
        for name in names:
            if name in self.env:
                return self._parse_int(name)
        return None

    def _parse_int(self, name: str) -> int:
        value = self.env[name]
        try:
            return int(value.strip())
        except ValueError:
            raise ValueError(
                f"{type(self).__name__} expected the environment variable {name} to be a whole number, got {value!r}."
            ) from None

    def _port(self, name: str) -> int:
        port = self._int(name)
        if not 0 < port < 65536:
            raise ValueError(f"{name}={port} is not a valid TCP port (1-65535).")
        return port

    @staticmethod
    def _mismatch(argument: str, value: int, reported: str, fix: str) -> ValueError:
        """The one wording for "Trainer setting disagrees with the launcher" errors."""
        return ValueError(f"{argument}={value} but {reported}. {fix}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
