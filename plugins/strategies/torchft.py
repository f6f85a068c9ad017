"""Per-step fault tolerance with torchft: data-parallel replica groups that drop out and rejoin while the rest train.

Each replica group (here one process; start one per machine or per GPU) joins a torchft ``Manager`` that meets
the others through a lighthouse (``torchft_lighthouse --min_replicas 1 --bind [::]:29510``). Every optimizer step:

1. ``start_quorum`` asks the lighthouse who is alive (asynchronously, while the forward pass runs);
2. the backward pass averages gradients over the live replica groups only (torchft's
   ``DistributedDataParallel``, whose communication is a process group rebuilt for each new quorum);
3. ``should_commit``: the optimizer steps only if every live group finished its all-reduce. A group that died
   mid-step makes the others skip that one update; at the next step the quorum no longer contains it and the
   survivors keep training, without a restart.

A group that (re)starts is behind the others: the quorum names a healthy peer, which sends its module, optimizer
and loop counters (``global_step``) over HTTP; the newcomer loads them and trains on in lockstep.

Each replica process is a one-process world for Relay (``world_size`` 1: collectives are identities, and each
writes its own logs and checkpoints); only the gradient average and the healing cross replica groups. The data is
sharded over ``num_replica_groups`` (the maximum number of groups, fixed, like torchft's ``DistributedSampler``):
group ``r`` reads shard ``r``, so a dead group's shard is simply not trained on while it is away.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import torch

from plugins.accelerators.base import Accelerator
from plugins.precision.base import Precision
from plugins.strategies.base import Strategy
from plugins.strategies.ddp import DDPSteps, _StepModule

log = logging.getLogger(__name__)

LIGHTHOUSE_ENV = "TORCHFT_LIGHTHOUSE"
GROUP_ID_ENV = "REPLICA_GROUP_ID"
NUM_GROUPS_ENV = "NUM_REPLICA_GROUPS"
_INSTALL = "pip install 'relaytrain[torchft]'"


def _env_int(value: int | None, env: str, argument: str) -> int | None:
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"TorchFTStrategy({argument}={value!r}) must be an integer, e.g. {argument}=0.")
        return value
    text = os.environ.get(env)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"TorchFTStrategy: {env}={text!r} must be an integer (or pass {argument}=<int>).") from None


def replica_ddp(manager: Any, module: torch.nn.Module) -> torch.nn.Module:
    """DDP whose gradient buckets are averaged over the live replica groups by the Manager.

    Built like torchft's ``DistributedDataParallel`` (a dummy process group soaks up DDP's own start-up
    broadcast; buckets are never rebuilt, so a rejoining group's buckets match), with a hook that survives a
    peer dying mid-all-reduce: torchft 0.2.0's own hook fails an ``assert`` there (measured: SIGKILL of a
    peer during backward ends the survivor with ``AssertionError`` in ``torchft/ddp.py``), while the Manager
    only needs the error reported, so that ``should_commit`` skips the step.
    """
    from torchft.process_group import ProcessGroupDummy

    ddp = torch.nn.parallel.DistributedDataParallel(
        _StepModule(module), process_group=ProcessGroupDummy(0, 1), find_unused_parameters=True,
    )

    def average(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks real annotations; strings fail
        buffer = bucket.buffer()
        state.allreduce(buffer).wait()  # an error is recorded on the Manager, never raised: the step won't commit
        done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        done.set_result(buffer)
        return done

    ddp.register_comm_hook(manager, average)
    return ddp


class TorchFTStrategy(DDPSteps, Strategy):
    """Data-parallel replica groups under torchft: a failed group is dropped at the next step and heals on rejoin."""

    name = "torchft"

    def __init__(
        self,
        lighthouse: str | None = None,
        replica_group_id: int | None = None,
        num_replica_groups: int | None = None,
        min_replicas: int = 1,
        timeout: float = 30.0,
        quorum_timeout: float = 60.0,
        hostname: str | None = None,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
    ) -> None:
        """``lighthouse``: the lighthouse's URL (default ``$TORCHFT_LIGHTHOUSE``); ``replica_group_id`` (default
        ``$REPLICA_GROUP_ID``) and ``num_replica_groups`` (default ``$NUM_REPLICA_GROUPS``) pick this group's data
        shard; ``min_replicas``: fewer live groups than this and no step commits; ``timeout``: seconds a
        collective or a checkpoint transfer may take before the step is given up; ``hostname``: the name peers
        reach this machine by (default: this machine's host name)."""
        super().__init__(accelerator=accelerator, precision=precision)
        self.lighthouse = lighthouse  # None: $TORCHFT_LIGHTHOUSE, read when training starts
        group = _env_int(replica_group_id, GROUP_ID_ENV, "replica_group_id")
        groups = _env_int(num_replica_groups, NUM_GROUPS_ENV, "num_replica_groups")
        self.replica_group_id = 0 if group is None else group
        self.num_replica_groups = max(self.replica_group_id + 1, 1) if groups is None else groups
        if self.num_replica_groups < 1 or not 0 <= self.replica_group_id < self.num_replica_groups:
            raise ValueError(
                f"TorchFTStrategy(replica_group_id={self.replica_group_id}, num_replica_groups="
                f"{self.num_replica_groups}): the id must be in [0, num_replica_groups); e.g. replica_group_id=0 "
                f"num_replica_groups=2 (or {GROUP_ID_ENV} / {NUM_GROUPS_ENV})."
            )
        for key, value in (("min_replicas", min_replicas), ("timeout", timeout), ("quorum_timeout", quorum_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"TorchFTStrategy({key}={value!r}) must be a positive number, e.g. {key}=1.")
        if min_replicas > self.num_replica_groups:
            raise ValueError(
                f"TorchFTStrategy(min_replicas={min_replicas}) is more than num_replica_groups="
                f"{self.num_replica_groups}: no step could ever commit. Use min_replicas=1 (or raise "
                "num_replica_groups)."
            )
        self.min_replicas = int(min_replicas)
        self.timeout = float(timeout)
        self.quorum_timeout = float(quorum_timeout)
        self.hostname = hostname
        self.manager: Any = None
        self.ddp: torch.nn.parallel.DistributedDataParallel | None = None
        self.optimizers: list[torch.optim.Optimizer] = []
        self._store: Any = None
        self._loop_state: tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]] | None = None
        self._participants = 0
        self.committed_steps = 0
        self.skipped_steps = 0
        self._device: torch.device | None = None

    # --- who am I: a one-process world; the replica groups only meet through the Manager -------------
    @property
    def root_device(self) -> torch.device:
        if self._device is None:
            self._device = self.accelerator.device_for(0, self.device_ids) if self.accelerator else torch.device("cpu")
        return self._device

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int]:
        return {"num_replicas": self.num_replica_groups, "rank": self.replica_group_id}

    @property
    def replica_id(self) -> str:
        """The name the lighthouse knows this group by (its trailing digits are the group id)."""
        return f"relay_{self.replica_group_id}"

    # --- lifecycle --------------------------------------------------------------------------------------
    def setup_environment(self) -> None:
        super().setup_environment()
        from lightning_utilities.core.imports import RequirementCache

        if not RequirementCache("torchft"):
            raise ModuleNotFoundError(f"strategy='torchft' needs torchft: {_INSTALL}")
        self._check_lighthouse()
        self.teardown_manager()  # a second fit with the same strategy: the previous Manager leaves the quorum first
        from torch.distributed import TCPStore
        from torchft.manager import Manager
        from torchft.process_group import ProcessGroupGloo

        timeout = datetime.timedelta(seconds=self.timeout)
        # the group's own store (one process: this one is its master); peers reach it for the quorum's group
        host = self.hostname or socket.gethostname()
        self._store = TCPStore(host_name=host, port=0, is_master=True, wait_for_workers=False)
        self.manager = Manager(
            pg=ProcessGroupGloo(timeout=timeout), min_replica_size=self.min_replicas,
            load_state_dict=self._load_replica_state, state_dict=self._replica_state,
            timeout=timeout, quorum_timeout=datetime.timedelta(seconds=self.quorum_timeout),
            connect_timeout=timeout, rank=0, world_size=1, store_addr=host, store_port=self._store.port,
            lighthouse_addr=self.lighthouse, replica_id=self.replica_id, hostname=host,
        )

    def _check_lighthouse(self) -> None:
        """One clear error for a lighthouse nobody named or started, instead of a quorum that times out later."""
        self.lighthouse = self.lighthouse or os.environ.get(LIGHTHOUSE_ENV)
        if not self.lighthouse:
            raise ValueError(
                f"TorchFTStrategy needs a torchft lighthouse: pass lighthouse='http://HOST:PORT' or set {LIGHTHOUSE_ENV}"
                " (from a config: strategy.lighthouse=http://localhost:29510). Start one with "
                "`torchft_lighthouse --min_replicas 1 --bind [::]:29510`."
            )
        url = urlparse(self.lighthouse if "://" in str(self.lighthouse) else f"http://{self.lighthouse}")
        try:
            with socket.create_connection((url.hostname or "localhost", url.port or 80), timeout=5):
                pass
        except OSError as err:
            raise ConnectionError(
                f"TorchFTStrategy: no torchft lighthouse answers at {self.lighthouse!r} ({err}). Start one with "
                f"`torchft_lighthouse --min_replicas 1 --bind [::]:{url.port or 29510}`, or point "
                f"strategy.lighthouse / {LIGHTHOUSE_ENV} at the running one."
            ) from None

    def check_module(self, module: torch.nn.Module) -> None:
        if not getattr(module, "automatic_optimization", True):
            raise ValueError(
                "strategy='torchft' steps the optimizer only when the replica groups' quorum commits, which needs "
                "automatic optimization; remove `self.automatic_optimization = False` or use strategy='ddp'."
            )

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        self.check_module(module)
        module = super().setup_module(module)
        if any(p.requires_grad for p in module.parameters()):
            self.ddp = replica_ddp(self.manager, module)
        return module

    def setup_optimizers(self, optimizers: list[torch.optim.Optimizer]) -> list[torch.optim.Optimizer]:
        self.optimizers = list(optimizers)
        return optimizers

    def connect_loop_state(
        self, state_dict: Callable[[], dict[str, Any]], load_state_dict: Callable[[dict[str, Any]], None],
    ) -> None:
        self._loop_state = (state_dict, load_state_dict)

    def on_stage_end(self) -> None:
        """The call's Manager leaves the quorum (the next call starts another), then the module goes to the CPU."""
        self.teardown_manager()
        super().on_stage_end()

    def teardown(self) -> None:
        self.teardown_manager()
        self.ddp = None
        super().teardown()

    def teardown_manager(self) -> None:
        """Leave the quorum: stop heartbeating, so the lighthouse stops waiting for this group."""
        if self.manager is not None:
            self.manager.shutdown(wait=False)
            self.manager = None
        self._store = None

    # --- what a healthy peer sends a rejoining group --------------------------------------------------
    def _replica_state(self) -> dict[str, Any]:
        if self.module is None:
            raise RuntimeError("TorchFTStrategy: a peer asked for this group's state before setup_module ran.")
        return {
            "module": self.module.state_dict(),
            "optimizers": [o.state_dict() for o in self.optimizers],
            "progress": self._loop_state[0]() if self._loop_state is not None else {},
        }

    def _load_replica_state(self, state: dict[str, Any]) -> None:
        if self.module is None:
            raise RuntimeError("TorchFTStrategy: a peer's state arrived before setup_module ran.")
        self.module.load_state_dict(state["module"])
        for optimizer, optimizer_state in zip(self.optimizers, state["optimizers"]):
            optimizer.load_state_dict(optimizer_state)
        if self._loop_state is not None and state["progress"]:
            self._loop_state[1](state["progress"])
        log.warning("torchft: replica group %s healed from a peer (global_step=%s)", self.replica_group_id,
                    state["progress"].get("global_step"))

    # --- one step ---------------------------------------------------------------------------------------
    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any]) -> Any:
        """Quorum (overlapping the forward pass), forward/backward with the all-reduce, then step if it commits."""
        manager = self.manager
        manager.start_quorum()
        result = closure()
        if manager.should_commit():
            self.committed_steps += 1
            self.precision.optimizer_step(optimizer, lambda: result)
        else:
            self.skipped_steps += 1
            log.warning("torchft: replica group %s skipped a step: the quorum did not commit (a peer failed)",
                        self.replica_group_id)
        participants = manager.num_participants()
        if participants != self._participants:
            log.warning("torchft: replica group %s: quorum %d -> %d replica groups (step %d)", self.replica_group_id,
                        self._participants, participants, manager.current_step())
            self._participants = participants
        return result

    def __repr__(self) -> str:
        return (f"TorchFTStrategy(lighthouse={self.lighthouse!r}, replica_group_id={self.replica_group_id}, "
                f"num_replica_groups={self.num_replica_groups})")
