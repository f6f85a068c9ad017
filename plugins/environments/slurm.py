"""Processes started by ``srun`` inside a SLURM job.

Detection rule (all must hold), chosen so that only the tasks of an srun step count:

1. ``SLURM_NTASKS`` is set (a job with a task count).
2. ``SLURM_STEP_ID`` (or the old ``SLURM_STEPID``) is a regular step number. The batch script's own
   shell has no step id (or the special "batch" id), and so has an ``salloc`` shell; the interactive
   step that ``salloc`` opens on a compute node uses the special "interactive" id. Special ids are the
   top values of the 32-bit range (>= 0xFFFFFFF0, or negative when printed signed), so those are not
   SLURM tasks: a plain ``python train.py`` there is a local run that Relay launches itself.
3. The step is not an interactive shell: a one-task step whose job is named ``bash`` /
   ``interactive`` or that has a pseudo-terminal (``SLURM_PTY_PORT``) is ``srun --pty bash``, and a
   Python started from that shell is local too. ``srun -n 4 python ...`` typed in such a shell is a
   new four-task step, so it still counts as SLURM.
4. No launcher started inside the step disagrees: ``mpirun`` under SLURM starts its daemons with
   srun, so its processes inherit a step id but carry Open MPI / PMI / Horovod ranks that differ
   from ``SLURM_PROCID`` / ``SLURM_NTASKS``; those processes belong to the MPI environment.
   (``torchrun`` inside srun is caught earlier: torch elastic is detected first.)

Ranks: ``SLURM_PROCID`` (global), ``SLURM_LOCALID`` (local), ``SLURM_NODEID`` (node), ``SLURM_NTASKS``
(world size). The main address is ``MASTER_ADDR`` when exported, else the first host of the step's
node list (``SLURM_STEP_NODELIST``, then ``SLURM_NODELIST``, then ``SLURM_JOB_NODELIST``), where rank 0
runs under srun's default block distribution. The main port is ``MASTER_PORT`` when exported, else
``15000 + SLURM_JOB_ID % 20000``: every task computes the same number with no communication.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator, Mapping

from plugins.environments.base import ClusterEnvironment, environ
from plugins.environments.mpi import mpi_rank_and_size

FIRST_SPECIAL_STEP_ID = 0xFFFFFFF0  # SLURM_BATCH_SCRIPT, SLURM_INTERACTIVE_STEP, SLURM_EXTERN_CONT, ...
INTERACTIVE_JOB_NAMES = ("bash", "interactive")
NODELIST_VARIABLES = ("SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST")

_BRACKET = r"(\[[^\[\]]*\])"  # compiled (and cached by re) on first use


# --- host lists ---------------------------------------------------------------------------------
def _split_top_level(nodelist: str) -> list[str]:
    """Split at commas outside brackets: ``a[1,2],b`` -> ``["a[1,2]", "b"]``."""
    parts, start, inside = [], 0, False
    for i, char in enumerate(nodelist):
        if char == "[":
            if inside:
                raise ValueError(f"Nested '[' in SLURM node list {nodelist!r}.")
            inside = True
        elif char == "]":
            if not inside:
                raise ValueError(f"Unmatched ']' in SLURM node list {nodelist!r}.")
            inside = False
        elif char == "," and not inside:
            parts.append(nodelist[start:i])
            start = i + 1
    if inside:
        raise ValueError(f"Unclosed '[' in SLURM node list {nodelist!r}.")
    parts.append(nodelist[start:])
    return [part.strip() for part in parts]


def _parse_ranges(body: str, nodelist: str) -> list[tuple[int, int, int]]:
    """``01-03,7`` -> ``[(1, 3, 2), (7, 7, 1)]``: (low, high, zero-padded width from the low bound)."""
    ranges = []
    for item in body.split(","):
        low, sep, high = item.strip().partition("-")
        high = high if sep else low
        if not (low.isdecimal() and high.isdecimal()) or int(low) > int(high):
            raise ValueError(f"Bad range {item!r} in SLURM node list {nodelist!r}; expected e.g. 'node[01-04,07]'.")
        ranges.append((int(low), int(high), len(low)))
    return ranges


def _combine(pieces: list[str | list[tuple[int, int, int]]]) -> Iterator[str]:
    """Every host of one expression, lazily (the first bracket varies slowest, as Slurm orders them)."""
    if not pieces:
        yield ""
        return
    head, rest = pieces[0], pieces[1:]
    values = [head] if isinstance(head, str) else (
        str(n).zfill(width) for low, high, width in head for n in range(low, high + 1))
    for value in values:
        for tail in _combine(rest):
            yield value + tail


def _iter_hosts(nodelist: str) -> Iterator[str]:
    text = re.sub(r"\s*,\s*|\s+", ",", nodelist.strip())  # hosts may also be separated by spaces ("a b", "a, b")
    if not text:
        raise ValueError("The SLURM node list is empty.")
    expressions = []
    for expression in _split_top_level(text):  # parse everything first, so a bad list fails up front
        if not expression:
            raise ValueError(f"Empty host name in SLURM node list {nodelist!r}.")
        pieces = re.split(_BRACKET, expression)  # literal, [range], literal, [range], ..., literal
        expressions.append([p if i % 2 == 0 else _parse_ranges(p[1:-1], nodelist) for i, p in enumerate(pieces)])
    for pieces in expressions:
        yield from _combine(pieces)


def expand_hostlist(nodelist: str) -> list[str]:
    """Every host of a SLURM host list such as ``node[01-04,07]`` or ``gpu-a[1-2],gpu-b3``, in order."""
    return list(_iter_hosts(nodelist))


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list, without expanding the rest."""
    return next(_iter_hosts(nodelist))


def _tasks_per_node(spec: str) -> list[int]:
    """SLURM's compressed form: ``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for item in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if match is None:
            raise ValueError(f"Cannot read the SLURM tasks-per-node value {spec!r}.")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


# --- detection ----------------------------------------------------------------------------------
def _step_id(env: Mapping[str, str]) -> int | None:
    raw = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "")).strip()
    return int(raw) if raw.isdecimal() else None  # "-5" (a special id printed signed) is not a digit string


def _is_interactive_shell(env: Mapping[str, str]) -> bool:
    tasks = env.get("SLURM_STEP_NUM_TASKS", env.get("SLURM_NTASKS", "")).strip()
    shell_like = env.get("SLURM_JOB_NAME") in INTERACTIVE_JOB_NAMES or "SLURM_PTY_PORT" in env
    return tasks == "1" and shell_like


def _inner_launcher_disagrees(env: Mapping[str, str]) -> bool:
    reported = mpi_rank_and_size(env)
    if reported is None:
        return False
    rank, size = reported
    return str(rank) != env.get("SLURM_PROCID", "").strip() or str(size) != env.get("SLURM_NTASKS", "").strip()


class SLURMEnvironment(ClusterEnvironment):
    """Ranks of an srun step; see the module docstring for the detection rule.

    ``auto_requeue`` and ``requeue_signal`` are Lightning's: with ``auto_requeue`` (default), ``requeue_signal``
    (default SIGUSR1) is one of the signals on which a fit saves a checkpoint, exits and requeues the job (Relay's
    preemption handling, ``Trainer(preemption_signals=..., auto_requeue=...)``); ``auto_requeue=False`` saves and
    exits without requeueing."""

    name = "slurm"
    launcher = "srun"

    def __init__(self, auto_requeue: bool = True, requeue_signal: signal.Signals | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        self.auto_requeue = auto_requeue
        self.requeue_signal = signal.SIGUSR1 if requeue_signal is None else requeue_signal

    @staticmethod
    def resolve_root_node_address(nodes: str) -> str:
        """The first host of a SLURM node list (``node[1-4],other`` gives ``node1``): where rank 0 listens."""
        return first_host(nodes)

    @staticmethod
    def job_name() -> str | None:
        return os.environ.get("SLURM_JOB_NAME")

    @staticmethod
    def job_id() -> int | None:
        """The batch job's id; None outside one or in an interactive job (named ``bash``/``interactive``)."""
        job_id = os.environ.get("SLURM_JOB_ID")
        if job_id is None or SLURMEnvironment.job_name() in ("bash", "interactive"):
            return None
        try:
            return int(job_id)
        except ValueError:
            return None

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        if "MASTER_ADDR" in self.env:
            return self.env["MASTER_ADDR"]
        return first_host(self._str(*NODELIST_VARIABLES))

    @property
    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._port("MASTER_PORT")
        return 15000 + self._int("SLURM_JOB_ID", "SLURM_JOBID") % 20000

    def world_size(self) -> int:
        return self._int("SLURM_NTASKS")

    def global_rank(self) -> int:
        return self._int("SLURM_PROCID")

    def local_rank(self) -> int:
        return self._int("SLURM_LOCALID")

    def num_nodes(self) -> int:
        return self._optional_int("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES") or 1

    def node_rank(self) -> int:
        return self._int("SLURM_NODEID")

    @staticmethod
    def detect(env: Mapping[str, str] | None = None) -> bool:
        env = environ(env)
        if "SLURM_NTASKS" not in env:
            return False
        step = _step_id(env)
        if step is None or step >= FIRST_SPECIAL_STEP_ID:
            return False
        return not _is_interactive_shell(env) and not _inner_launcher_disagrees(env)

    def tasks_per_node(self) -> tuple[str, list[int]] | None:
        """(variable read, task count of each node), from ``--ntasks-per-node`` or srun's step layout."""
        if "SLURM_NTASKS_PER_NODE" in self.env:
            return "SLURM_NTASKS_PER_NODE", [self._int("SLURM_NTASKS_PER_NODE")]
        for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
            if name in self.env:
                return name, _tasks_per_node(self.env[name])
        return None

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        nodes_name = next((n for n in ("SLURM_NNODES", "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES") if n in self.env),
                          None)
        if nodes_name is not None:
            nodes = self._int(nodes_name)
            if nodes != num_nodes:
                raise self._mismatch(
                    "num_nodes", num_nodes, f"{nodes_name}={nodes} (srun started the tasks on {nodes} node(s))",
                    f"Pass num_nodes={nodes}, or submit with `--nodes={num_nodes}`.",
                )
        reported = self.tasks_per_node()
        if reported is None:  # nothing per node to compare: check the total
            total = self.world_size()
            if total != num_devices * num_nodes:
                raise self._mismatch(
                    "devices", num_devices,
                    f"SLURM_NTASKS={total}, not devices * num_nodes = {num_devices * num_nodes}",
                    f"Submit with `--nodes={num_nodes} --ntasks-per-node={num_devices}`.",
                )
            return
        name, counts = reported
        if any(count != num_devices for count in counts):
            uniform = len(set(counts)) == 1
            raise self._mismatch(
                "devices", num_devices,
                f"{name}={self.env[name]}" + ("" if uniform else f" (tasks per node: {counts})"),
                (f"Pass devices={counts[0]}, or" if uniform else "Relay needs the same number of tasks on every node:")
                + f" submit with `--ntasks-per-node={num_devices}`.",
            )
