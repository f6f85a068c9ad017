"""Processes started by ``jsrun`` in an IBM Spectrum LSF job (Summit-style clusters).

jsrun sets ``JSM_NAMESPACE_RANK`` / ``JSM_NAMESPACE_LOCAL_RANK`` / ``JSM_NAMESPACE_SIZE`` for each task; LSF sets
``LSB_JOBID`` and ``LSB_DJOB_RANKFILE``, an Open MPI style host file: one line per task slot, its first line the
launch node, which runs no task. The main address is the first compute host; the node rank is the position of this
host among the distinct compute hosts; the port is ``MASTER_PORT`` when exported, else ``10000 + LSB_JOBID % 1000``
(the same on every task, with no communication). Lightning's ``LSFEnvironment`` reads the same variables; unlike it,
this one never writes ``MASTER_ADDR``/``MASTER_PORT`` into ``os.environ`` (the strategy uses what it reports).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from plugins.environments.base import ClusterEnvironment, environ

REQUIRED = ("LSB_JOBID", "LSB_DJOB_RANKFILE", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE")


class LSFEnvironment(ClusterEnvironment):
    """Ranks of a jsrun task, read from the JSM variables and the LSF rank file."""

    name = "lsf"
    launcher = "jsrun"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        """Checks the LSF variables at once, as Lightning's does (the messages are Lightning's, then a hint)."""
        super().__init__(env)
        self._hosts: list[str] | None = None
        if "LSB_DJOB_RANKFILE" not in self.env:
            raise ValueError("Did not find the environment variable `LSB_DJOB_RANKFILE`: LSFEnvironment runs in an "
                             "LSF job (jsrun sets it to the job's rank file).")
        if not self.env["LSB_DJOB_RANKFILE"].strip():
            raise ValueError("The environment variable `LSB_DJOB_RANKFILE` is empty: jsrun sets it to the job's rank "
                             "file.")
        if "LSB_JOBID" not in self.env:
            raise ValueError("Could not find job id in environment variable LSB_JOBID: LSFEnvironment runs in an "
                             "LSF job.")

    def compute_hosts(self) -> list[str]:
        """Hosts of the rank file, minus its first line (the launch node); read once."""
        if self._hosts is None:
            path = self._str("LSB_DJOB_RANKFILE")
            with open(path) as f:
                lines = [line.strip() for line in f if line.strip()]
            if len(lines) < 2:
                raise ValueError(f"LSFEnvironment: the rank file {path} (LSB_DJOB_RANKFILE) lists no compute host "
                                 "after its launch node line.")
            self._hosts = lines[1:]
        return self._hosts

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return self.compute_hosts()[0]

    @property
    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._port("MASTER_PORT")
        return 10000 + self._int("LSB_JOBID") % 1000

    def world_size(self) -> int:
        return self._int("JSM_NAMESPACE_SIZE")

    def global_rank(self) -> int:
        return self._int("JSM_NAMESPACE_RANK")

    def local_rank(self) -> int:
        return self._int("JSM_NAMESPACE_LOCAL_RANK")

    def node_rank(self) -> int:
        distinct = list(dict.fromkeys(self.compute_hosts()))
        host = socket.gethostname()
        if host not in distinct:
            raise ValueError(f"LSFEnvironment: this host {host!r} is not in the rank file "
                             f"{self.env['LSB_DJOB_RANKFILE']} (hosts: {', '.join(distinct)}).")
        return distinct.index(host)

    def num_nodes(self) -> int:
        return len(dict.fromkeys(self.compute_hosts()))

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        env = environ(env)
        return all(name in env for name in REQUIRED)

    # Lightning's setters: jsrun owns the ranks, so these are ignored (as in Lightning)
    def set_world_size(self, size: int) -> None:
        pass

    def set_global_rank(self, rank: int) -> None:
        pass
