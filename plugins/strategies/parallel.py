"""What every multi-process strategy shares: the process group, ranks, collectives and the launcher.

Ranks come from the cluster environment (torchrun, SLURM, MPI, Kubernetes, or the workers Relay's own
launcher started, which look exactly like torchrun's). The process group meets at the environment's
``main_address:main_port`` through a ``tcp://`` init method, so nothing is written to ``os.environ``.
Start-up (rendezvous, ``prepare_data``, model set-up, checkpoint loading) waits at most
``startup_timeout``; from the first training step on, every collective waits at most ``timeout``: a rank
that never arrives becomes an error on the ranks that wait (naming it, see ``trainer/distributed/heartbeat.py``),
never a silent hang.
"""

from __future__ import annotations

import datetime
import sys
import time
from typing import TYPE_CHECKING, Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.launchers.base import is_peer_failure
from plugins.launchers.elastic import ElasticLauncher
from plugins.precision.base import Precision
from plugins.strategies.base import Strategy
from plugins.strategies.gather import all_gather_with_grad
from plugins.strategies.mesh import DIMS, MeshLayout

if TYPE_CHECKING:
    from plugins.environments.base import ClusterEnvironment

_REDUCE_OPS = ("mean", "sum", "max", "min")


DEFAULT_TIMEOUT = 300  # s a training collective waits: a stuck rank ends the run within minutes
DEFAULT_STARTUP_TIMEOUT = 900  # s for start-up: slow node starts, rank 0's prepare_data (downloads)
# s a rank stopped by a peer's failure waits before it exits: the launcher then sees the failed rank end first and
# names it (a forked peer's end reaches the launcher through its stand-in, a moment after the peer died)
PEER_FAILURE_GRACE = 2.0


def as_timeout(value: float | datetime.timedelta | None, name: str = "timeout",
               default: float = DEFAULT_TIMEOUT) -> datetime.timedelta:
    """Seconds (or a timedelta) as the timedelta torch.distributed takes; None: the default."""
    if value is None:
        return datetime.timedelta(seconds=default)
    if isinstance(value, datetime.timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive number of seconds (e.g. {name}=600).")
    return datetime.timedelta(seconds=float(value))


_EXIT = {"failed": False}  # set by the excepthook below; read once, at exit


def report_peer_failures_briefly(rank: int) -> None:
    """When another rank dies, the survivors' collectives fail too; print one line for those, not a traceback.

    The failing rank's own traceback is the one worth reading, and the launcher points at it: this rank leaves
    ``PEER_FAILURE_GRACE`` seconds later, so that the launcher sees the failed rank end first (seen on a loaded
    2-core machine: a SIGKILLed rank was reported after its peer, and the peer named as the failure).
    """
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        _EXIT["failed"] = True  # this rank is going down with an error: no shutdown barrier
        text = str(value)
        if issubclass(kind, RuntimeError) and is_peer_failure(text):  # gloo/NCCL errors
            print(f"[rank{rank}]: stopped: another rank failed first ({kind.__name__}: {text.splitlines()[0][:200]})",
                  file=sys.stderr, flush=True)
            time.sleep(PEER_FAILURE_GRACE)
            return
        previous(kind, value, tb)

    sys.excepthook = hook


def _destroy_group() -> None:
    """At exit: leave together, then destroy the group while the interpreter is still whole.

    A rank that closes its gloo sockets while a peer still tears down can make the peer abort
    ("terminate called without an active exception"); a short monitored barrier lines the ranks up,
    and gives up after 10 s when a peer is gone (a failed run), so exit is never held up for long.
    """
    import datetime

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    if dist.get_backend() == "gloo" and dist.get_world_size() > 1 and not _EXIT["failed"]:
        try:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
        except Exception:  # a peer already left or failed: destroy what is left of ours
            pass
    dist.destroy_process_group()


class ParallelStrategy(Strategy):
    """One process per device, joined in a ``torch.distributed`` process group, laid out on one ``DeviceMesh``.

    ``dp_replicate``/``dp_shard``/``cp``/``tp``/``pp`` override the subclass's preset degrees (``layout_preset``);
    a subclass lists in ``layout_dims`` the degrees it knows how to apply.
    """

    layout_preset = MeshLayout(dp_replicate=-1, dp_shard=1)
    layout_dims: tuple[str, ...] = ("dp_replicate",)

    def __init__(
        self,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
        process_group_backend: str | None = None,
        timeout: float | datetime.timedelta | None = DEFAULT_TIMEOUT,
        max_restarts: int = 0,
        shutdown_timeout: float = 30,
        startup_timeout: float | datetime.timedelta | None = DEFAULT_STARTUP_TIMEOUT,
        dp_replicate: int | None = None,
        dp_shard: int | None = None,
        tp: int | None = None,
        pp: int | None = None,
        cp: int | None = None,
        checkpoint_io: Any = None,
        parallel_devices: list[torch.device] | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        precision_plugin: Precision | None = None,
    ) -> None:
        """``parallel_devices`` (Lightning's): one device per local process; the Trainer takes the accelerator type
        and the devices from them (an ``accelerator`` of another type is an error). ``cluster_environment``
        (Lightning's): who this process is, instead of the one detected (a ``plugins=`` environment still wins)."""
        super().__init__(accelerator=accelerator, precision=precision, checkpoint_io=checkpoint_io,
                         precision_plugin=precision_plugin)
        self.environment = cluster_environment
        self._parallel_devices = list(parallel_devices) if parallel_devices is not None else None
        given = {"pp": pp, "dp_replicate": dp_replicate, "dp_shard": dp_shard, "cp": cp, "tp": tp}
        self._degrees = {name: value for name, value in given.items() if value is not None}
        MeshLayout(**{**self.layout_preset.degrees(), **self._degrees})  # bad values fail here, not at launch
        unsupported = [n for n, v in self._degrees.items() if v != 1 and n not in self.layout_dims]
        if unsupported:
            name = unsupported[0]
            raise ValueError(
                f"{type(self).__name__}({name}={self._degrees[name]}): this strategy applies only "
                f"{', '.join(self.layout_dims)}; use strategy=pipeline (pp, with dp_replicate/dp_shard/tp), "
                f"strategy=model_parallel (tp x dp_shard) or strategy=fsdp (dp_replicate x dp_shard), e.g. "
                f"strategy=pipeline strategy.{name}={self._degrees[name]}."
            )
        self.device_mesh: Any = None
        if process_group_backend is not None and process_group_backend not in ("gloo", "nccl", "xccl", "mpi"):
            raise ValueError(
                f"process_group_backend={process_group_backend!r} is not a torch.distributed backend; "
                "use 'gloo' (CPU), 'nccl' (NVIDIA/AMD GPUs), 'xccl' (Intel GPUs), 'mpi', or leave it unset."
            )
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts={max_restarts!r} must be an int >= 0.")
        if not isinstance(shutdown_timeout, (int, float)) or shutdown_timeout <= 0:
            raise ValueError(f"shutdown_timeout={shutdown_timeout!r} must be a positive number of seconds.")
        self._backend = process_group_backend
        self.timeout = as_timeout(timeout)
        self.startup_timeout = as_timeout(startup_timeout, "startup_timeout", DEFAULT_STARTUP_TIMEOUT)
        self.store: Any = None  # the rendezvous store (a heartbeat shares it); None until the group exists
        self.max_restarts = max_restarts
        self.shutdown_timeout = float(shutdown_timeout)
        self._created_group = False

    def connect(self, accelerator: Accelerator, precision: Precision, environment: Any = None,
                device_ids: list[int] | None = None, num_nodes: int = 1) -> None:
        super().connect(accelerator, precision, environment, device_ids, num_nodes)
        self._check_backend()
        self.layout  # noqa: B018 (a layout that does not fit the world size fails at Trainer construction)

    # --- layout -----------------------------------------------------------------------------------
    def _layout_request(self) -> MeshLayout:
        """The degrees asked for (preset, then the user's); subclasses may derive presets from placement."""
        return MeshLayout.request(self.layout_preset, self._degrees, self.layout_dims)

    @property
    def layout(self) -> MeshLayout:
        """The degrees for this run's world size (``-1`` filled in)."""
        return self._layout_request().resolve(self.world_size)

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int]:
        rank, size = self.layout.data_parallel(self.global_rank)
        return {"num_replicas": size, "rank": rank}

    def _check_backend(self) -> None:
        """``nccl`` (or ``xccl``) on a CPU run cannot work: say so before anything starts."""
        backend, acc = self._backend, self.accelerator
        if backend in ("nccl", "xccl") and acc is not None and acc.name == "cpu":
            raise ValueError(
                f"{type(self).__name__}(process_group_backend={backend!r}) needs GPUs, but the accelerator is "
                "'cpu'. Use process_group_backend='gloo' (or leave it unset), or accelerator='cuda'."
            )

    @property
    def process_group_backend(self) -> str:
        if self._backend is not None:
            return self._backend
        return self.accelerator.distributed_backend if self.accelerator is not None else "gloo"

    # --- who am I -------------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        env = self.environment
        if env is not None and env.creates_processes_externally:
            return env.world_size()
        return len(self.device_ids) * self.num_nodes

    @property
    def global_rank(self) -> int:
        env = self.environment
        return env.global_rank() if env is not None and env.creates_processes_externally else 0

    @property
    def local_rank(self) -> int:
        env = self.environment
        return env.local_rank() if env is not None and env.creates_processes_externally else 0

    @property
    def node_rank(self) -> int:
        env = self.environment
        return env.node_rank() if env is not None and env.creates_processes_externally else 0

    @property
    def root_device(self) -> torch.device:
        if self.accelerator is None:
            return torch.device("cpu")
        return self.accelerator.device_for(self.local_rank, self.device_ids)

    @property
    def parallel_devices(self) -> list[torch.device] | None:
        """One device per local process: as given, else the chosen accelerator's (None before one is chosen)."""
        if self._parallel_devices is not None or self.accelerator is None:
            return self._parallel_devices
        return [self.accelerator.device_for(rank, self.device_ids) for rank in range(len(self.device_ids))]

    @parallel_devices.setter
    def parallel_devices(self, devices: list[torch.device] | None) -> None:
        self._parallel_devices = list(devices) if devices is not None else None

    @property
    def num_processes(self) -> int:
        """Processes on this node (Lightning's name)."""
        devices = self.parallel_devices
        return len(devices) if devices is not None else len(self.device_ids)

    def block_backward_sync(self) -> Any:
        """Lightning's context for backward passes whose gradients are not synchronised (``no_backward_sync``)."""
        return self.no_backward_sync(True)

    @property
    def launcher(self) -> Any:
        """Relay's launcher when this process must start the workers itself, else None."""
        env = self.environment
        if env is None or env.creates_processes_externally or self.world_size == 1:
            return None
        return ElasticLauncher(
            nprocs=len(self.device_ids), main_address=env.main_address, main_port=env.main_port,
            max_restarts=self.max_restarts, shutdown_timeout=self.shutdown_timeout, num_nodes=self.num_nodes,
            node_rank=env.node_rank() if self.num_nodes > 1 else 0,  # a stray NODE_RANK on one node changes nothing
        )

    # --- lifecycle ------------------------------------------------------------------------------
    def setup_environment(self) -> None:
        super().setup_environment()
        self._init_process_group()
        self.device_mesh = self.layout.build(self.root_device.type)

    def _init_process_group(self) -> None:
        import torch.distributed as dist

        if self.launcher is not None:
            raise RuntimeError(
                f"{type(self).__name__} with {self.world_size} processes was set up in the launching process; "
                "the Trainer starts the workers first (Trainer.fit/validate/test/predict do)."
            )
        if dist.is_available() and dist.is_initialized():
            if dist.get_world_size() != self.world_size:
                raise RuntimeError(
                    f"A process group of {dist.get_world_size()} processes exists already, but this run needs "
                    f"{self.world_size}."
                )
            return
        env = self.environment
        kwargs: dict[str, Any] = {}
        if self.process_group_backend == "nccl" and self.root_device.type == "cuda":
            kwargs["device_id"] = self.root_device
        self.store = self._store()
        dist.init_process_group(
            self.process_group_backend, store=self.store, world_size=self.world_size, rank=self.global_rank,
            timeout=self.startup_timeout, **kwargs,
        )
        self._created_group = True
        # kept for the next stage (fit, then test); destroyed at exit so no backend warns about a live group
        import atexit

        atexit.register(_destroy_group)
        report_peer_failures_briefly(self.global_rank)

    def _store(self) -> Any:
        """Where the ranks meet: rank 0's TCP store, or the elastic agent's when it shares one.

        An agent's store outlives a failed attempt, so there keys are prefixed with the restart count: the restarted
        ranks must not read the dead ranks' addresses. Rank 0's own store is new at every attempt (torch elastic
        publishes a new port each round), and needs no prefix: the restart count is not the same on every node (an
        agent that restarts its workers for a peer's failure or a node that joins does not count up).
        """
        import torch.distributed as dist

        env = self.environment
        variables = getattr(env, "env", {})
        agent_store = variables.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store = dist.TCPStore(
            env.main_address, env.main_port, self.world_size, is_master=self.global_rank == 0 and not agent_store,
            timeout=self.startup_timeout, multi_tenant=True,
        )
        attempt = variables.get("TORCHELASTIC_RESTART_COUNT", "0") if agent_store else "0"
        return dist.PrefixStore(f"relay/attempt{attempt}", store)

    def begin_training(self) -> None:
        """Start-up is over: collectives from here on wait at most ``timeout``."""
        super().begin_training()
        if self._group_ready():
            from torch.distributed.distributed_c10d import _set_pg_timeout

            _set_pg_timeout(self.timeout)

    def teardown(self) -> None:
        super().teardown()
        import torch.distributed as dist

        if self._created_group and dist.is_initialized():
            dist.destroy_process_group()
            self._created_group = False

    # --- collectives ----------------------------------------------------------------------------
    @property
    def _collective_device(self) -> torch.device:
        """Where small tensors for a collective live: the CPU for gloo, the process's device otherwise."""
        return torch.device("cpu") if self.process_group_backend == "gloo" else self.root_device

    def _group_ready(self) -> bool:
        import torch.distributed as dist

        return self.world_size > 1 and dist.is_available() and dist.is_initialized()

    def all_reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        if not self._group_ready():
            return tensor
        import torch.distributed as dist

        op = str(op).lower()
        if op not in _REDUCE_OPS:
            raise ValueError(f"all_reduce(op={op!r}) is not supported; use one of {', '.join(_REDUCE_OPS)}.")
        out = tensor.detach().clone() if isinstance(tensor, torch.Tensor) else torch.tensor(tensor)
        needs_float = op == "mean" and not out.is_floating_point()
        if needs_float:
            out = out.float()
        if out.device != self._collective_device and self.process_group_backend != "gloo":
            out = out.to(self._collective_device)
        reduce_op = {"mean": dist.ReduceOp.SUM, "sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                     "min": dist.ReduceOp.MIN}[op]
        dist.all_reduce(out, op=reduce_op)
        if op == "mean":
            out = out / self.world_size
        return out

    def all_gather(self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False) -> torch.Tensor:
        if not self._group_ready():
            return tensor.unsqueeze(0)
        import torch.distributed as dist

        tensor = tensor.contiguous()
        if sync_grads:  # each rank's gradient reaches the rank that made the slice
            return all_gather_with_grad(tensor, group)
        out = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(out, tensor, group=group)
        return torch.stack(out)

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not self._group_ready():
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        if not self._group_ready():
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]

    def barrier(self, name: str | None = None) -> None:
        if not self._group_ready():
            return
        import torch.distributed as dist

        if self.process_group_backend == "nccl":
            dist.barrier(device_ids=[self.root_device.index])
        else:
            dist.barrier()

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        if not self._group_ready():
            return decision
        import torch.distributed as dist

        flag = torch.tensor(int(bool(decision)), device=self._collective_device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN if all else dist.ReduceOp.MAX)
        return bool(flag.item())

    def start_vote(self, flags: list[bool]) -> Any:
        if not self._group_ready():
            return super().start_vote(flags)
        import torch.distributed as dist

        votes = torch.tensor([int(bool(f)) for f in flags], device=self._collective_device)
        work = dist.all_reduce(votes, op=dist.ReduceOp.MAX, async_op=True)

        def result() -> list[bool]:
            work.wait()
            return [bool(v) for v in votes.tolist()]

        return result

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"world_size={self.world_size})")
