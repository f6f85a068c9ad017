"""Lightning Fabric's distributed helpers (``lightning.fabric.utilities.distributed``) and its collectives API
(``lightning.fabric.plugins.collectives``), on public ``torch.distributed`` calls.

Relay's strategies run their own collectives (``Strategy.all_reduce`` / ``all_gather`` / ``barrier``); these are the
free functions and classes Lightning's users and tests call directly: reduce or gather a tensor over the default (or a
given) process group, open and close the group, a barrier without a timeout, a sampler that shards any sampler.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (``impl/fabric_refused.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import logging
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union, runtime_checkable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import Dataset, DistributedSampler, Sampler

from plugins.strategies.gather import all_gather_with_grad
from trainer.lightning_compat.impl.utilities import _distributed_is_initialized
from trainer.utilities.rank_zero import rank_zero_info

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeGuard

    from plugins.environments.base import ClusterEnvironment

log = logging.getLogger(__name__)

ReduceOp = dist.ReduceOp
RedOpType = dist.ReduceOp.RedOpType
if dist.is_available():
    from torch.distributed import group  # Lightning's module exposes it
    from torch.distributed.constants import default_pg_timeout
else:  # a torch built without distributed support: the names still exist, as in Lightning
    default_pg_timeout = datetime.timedelta(minutes=30)

    class group:  # type: ignore[no-redef]
        WORLD = None


@runtime_checkable
class CollectibleGroup(Protocol):
    """What a process group offers a collective: its size and this process's rank in it."""

    def size(self) -> int: ...

    def rank(self) -> int: ...


# --- reductions and gathers ------------------------------------------------------------------------------------------
def _simple_gather_all_tensors(result: Tensor, group: Any, world_size: int) -> list[Tensor]:
    out = [torch.zeros_like(result) for _ in range(world_size)]
    dist.all_gather(out, result, group)
    return out


def _gather_all_tensors(result: Tensor, group: Any | None = None) -> list[Tensor]:
    """Every process's ``result``, in rank order, on every process; tensors of the same number of dimensions but
    different sizes are padded for the gather and cut back to their own size."""
    group = dist.group.WORLD if group is None else group
    result = result.contiguous()
    world_size = dist.get_world_size(group)
    dist.barrier(group=group)
    if result.ndim == 0:
        return _simple_gather_all_tensors(result, group, world_size)
    size = torch.tensor(result.shape, device=result.device)
    sizes = [torch.zeros_like(size) for _ in range(world_size)]
    dist.all_gather(sizes, size, group=group)
    largest = torch.stack(sizes).max(dim=0).values
    if all(bool((s == largest).all()) for s in sizes):
        return _simple_gather_all_tensors(result, group, world_size)
    padding: list[int] = []
    for extra in reversed((largest - size).detach().cpu().tolist()):
        padding += [0, extra]  # F.pad takes the last dimension first
    padded = F.pad(result, padding)
    gathered = [torch.zeros_like(padded) for _ in range(world_size)]
    dist.all_gather(gathered, padded, group)
    return [tensor[tuple(slice(n) for n in s.tolist())] for tensor, s in zip(gathered, sizes)]


def _sync_ddp(result: Tensor, group: Any | None = None, reduce_op: Optional[Union[ReduceOp, str]] = None) -> Tensor:
    """All-reduce ``result`` in place over ``group`` (default: all processes) and return it. ``reduce_op``: a
    ``ReduceOp`` or its name (``"sum"``, ``"max"``, ``"avg"``/``"mean"``; None: sum). Gloo has no average: it sums
    and divides by the world size (an integer tensor keeps its dtype)."""
    group = dist.group.WORLD if group is None else group
    divide = False
    op: Optional[Union[ReduceOp, RedOpType]]
    if isinstance(reduce_op, str):
        name = "avg" if reduce_op == "mean" else reduce_op
        if name.lower() == "avg" and dist.get_backend(group) == "gloo":
            op, divide = ReduceOp.SUM, True
        else:
            op = getattr(ReduceOp, name.upper())
    else:
        op = reduce_op
    dist.barrier(group=group)
    if op is None:
        dist.all_reduce(result, group=group, async_op=False)
    else:
        dist.all_reduce(result, op=op, group=group, async_op=False)
    if not divide:
        return result
    world_size = dist.get_world_size(group)
    if not torch.is_floating_point(result):
        return result.copy_(result / world_size)
    return result.div_(world_size)


def _sync_ddp_if_available(result: Tensor, group: Any | None = None,
                           reduce_op: Optional[Union[ReduceOp, str]] = None) -> Tensor:
    """``_sync_ddp`` when a process group is up, else ``result`` unchanged."""
    return _sync_ddp(result, group=group, reduce_op=reduce_op) if _distributed_is_initialized() else result


def _all_gather_ddp_if_available(tensor: Tensor, group: Optional["torch.distributed.ProcessGroup"] = None,
                                 sync_grads: bool = False) -> Tensor:
    """``(world_size, *tensor.shape)`` when a process group is up (gradients flow back with ``sync_grads``), else
    ``tensor`` unchanged."""
    if not _distributed_is_initialized():
        return tensor

    tensor = tensor.contiguous()
    if sync_grads:
        return all_gather_with_grad(tensor, group)
    with torch.no_grad():
        out = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(out, tensor, group=group)
    return torch.stack(out)


# --- the process group -----------------------------------------------------------------------------------------------
def _init_dist_connection(cluster_environment: ClusterEnvironment, torch_distributed_backend: str,
                          global_rank: int | None = None,
                          world_size: int | None = None, **kwargs: Any) -> None:
    """Open the default process group from a cluster environment (its main address and port exported as
    ``MASTER_ADDR``/``MASTER_PORT``); nothing when one is open. ``kwargs`` go to ``init_process_group``."""
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available. Cannot initialize distributed process group")
    if dist.is_initialized():
        log.debug("torch.distributed is already initialized. Exiting early")
        return
    global_rank = cluster_environment.global_rank() if global_rank is None else global_rank
    world_size = cluster_environment.world_size() if world_size is None else world_size
    os.environ["MASTER_ADDR"] = cluster_environment.main_address
    os.environ["MASTER_PORT"] = str(cluster_environment.main_port)
    log.info(f"Initializing distributed: GLOBAL_RANK: {global_rank}, MEMBER: {global_rank + 1}/{world_size}")
    dist.init_process_group(torch_distributed_backend, rank=global_rank, world_size=world_size, **kwargs)
    if torch_distributed_backend == "nccl":
        atexit.register(_destroy_dist_connection)  # torch warns about an NCCL group left open at exit
    rank_zero_info(f"{'-' * 100}\ndistributed_backend={torch_distributed_backend}\n"
                   f"All distributed processes registered. Starting with {world_size} processes\n{'-' * 100}\n")


def _destroy_dist_connection() -> None:
    """Close the default process group if one is open (Ctrl+C ignored meanwhile)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if _distributed_is_initialized():
            dist.destroy_process_group()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


class _InfiniteBarrier:
    """A barrier that waits as long as it takes (a gloo group with a timeout of ~27 years), for work a subset of
    ranks does that must not hit the collective timeout. Inside ``with``, calling it waits; leaving waits once more
    and destroys the group. Without a process group it does nothing."""

    def __init__(self) -> None:
        self.group: Any = None  # a gloo ProcessGroup (its monitored_barrier is not in torch's stubs)
        self.barrier: Callable[..., None] = lambda: None

    def __call__(self) -> None:
        self.barrier()

    def __enter__(self) -> _InfiniteBarrier:
        if _distributed_is_initialized():
            self.group = dist.new_group(backend="gloo", timeout=datetime.timedelta(days=10000))
            self.barrier = self.group.monitored_barrier
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self.barrier()
        if self.group is not None:
            dist.destroy_process_group(self.group)


# --- sharding any sampler --------------------------------------------------------------------------------------------
_NEEDS_LEN = ("You seem to have configured a sampler in your DataLoader which does not provide {what} method. The "
              "sampler was about to be replaced by `DistributedSamplerWrapper` since `use_distributed_sampler` is True "
              "and you are using distributed training. Either provide {fix} in your sampler{which}, remove it from "
              "DataLoader or set `use_distributed_sampler=False` if you want to handle distributed sampling yourself.")


class _DatasetSamplerWrapper(Dataset):
    """A sampler's indices as a dataset (index i: the sampler's i-th index), drawn anew by ``reset``."""

    def __init__(self, sampler: Sampler | Iterable) -> None:
        if not isinstance(sampler, Sized):
            raise TypeError(" ".join(_NEEDS_LEN.format(what="`__len__`", fix="`__len__` method", which="").split()))
        if len(sampler) == float("inf"):
            raise TypeError(" ".join(_NEEDS_LEN.format(what="finite `__len__`", fix="`__len__` method",
                                                       which=" which returns a finite number").split()))
        self._sampler = sampler
        self._sampler_list: list[Any] | None = None  # drawn when first needed

    def __getitem__(self, index: int) -> Any:
        if self._sampler_list is None:
            self._sampler_list = list(self._sampler)
        return self._sampler_list[index]

    def __len__(self) -> int:
        return len(self._sampler)

    def reset(self) -> None:
        self._sampler_list = list(self._sampler)


class DistributedSamplerWrapper(DistributedSampler):
    """Any sampler, sharded over processes: each process reads its part of the indices the sampler draws (the
    sampler decides order and randomness; ``shuffle``/``seed`` here have no effect on them)."""

    def __init__(self, sampler: Sampler | Iterable, *args: Any, **kwargs: Any) -> None:
        super().__init__(_DatasetSamplerWrapper(sampler), *args, **kwargs)

    def __iter__(self) -> Iterator:
        self.dataset.reset()
        return (self.dataset[index] for index in super().__iter__())

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        inner = self.dataset._sampler
        if callable(getattr(inner, "set_epoch", None)):
            inner.set_epoch(epoch)


# --- collectives -----------------------------------------------------------------------------------------------------
class Collective(ABC):
    """Collective operations over a group of processes that this object may own (experimental in Lightning)."""

    def __init__(self) -> None:
        self._group: Optional[CollectibleGroup] = None

    @property
    @abstractmethod
    def rank(self) -> int: ...

    @property
    @abstractmethod
    def world_size(self) -> int: ...

    @property
    def group(self) -> CollectibleGroup:
        if self._group is None:
            raise RuntimeError(
                f"`{type(self).__name__}` does not own a group. HINT: try `collective.create_group().group`")
        return self._group

    @abstractmethod
    def broadcast(self, tensor: Tensor, src: int) -> Tensor: ...

    @abstractmethod
    def all_reduce(self, tensor: Tensor, op: str) -> Tensor: ...

    @abstractmethod
    def reduce(self, tensor: Tensor, dst: int, op: str) -> Tensor: ...

    @abstractmethod
    def all_gather(self, tensor_list: list[Tensor], tensor: Tensor) -> list[Tensor]: ...

    @abstractmethod
    def gather(self, tensor: Tensor, gather_list: list[Tensor], dst: int = 0) -> list[Tensor]: ...

    @abstractmethod
    def scatter(self, tensor: Tensor, scatter_list: list[Tensor], src: int = 0) -> Tensor: ...

    @abstractmethod
    def reduce_scatter(self, output: Tensor, input_list: list[Tensor], op: str) -> Tensor: ...

    @abstractmethod
    def all_to_all(self, output_tensor_list: list[Tensor], input_tensor_list: list[Tensor]) -> list[Tensor]: ...

    @abstractmethod
    def send(self, tensor: Tensor, dst: int, tag: int = 0) -> None: ...

    @abstractmethod
    def recv(self, tensor: Tensor, src: int | None = None, tag: int = 0) -> Tensor: ...

    @abstractmethod
    def barrier(self, device_ids: list[int] | None = None) -> None: ...

    @classmethod
    @abstractmethod
    def is_available(cls) -> bool: ...

    @classmethod
    @abstractmethod
    def is_initialized(cls) -> bool: ...

    @classmethod
    @abstractmethod
    def init_group(cls, **kwargs: Any) -> None: ...

    @classmethod
    @abstractmethod
    def new_group(cls, **kwargs: Any) -> CollectibleGroup: ...

    @classmethod
    @abstractmethod
    def destroy_group(cls, group: CollectibleGroup) -> None: ...

    @classmethod
    @abstractmethod
    def _convert_to_native_op(cls, op: str) -> Any: ...

    def setup(self, **kwargs: Any) -> Collective:
        """Open the default group (``init_group(**kwargs)``) unless one is open."""
        if not self.is_initialized():
            self.init_group(**kwargs)
        return self

    def create_group(self, **kwargs: Any) -> Collective:
        """Make a new group (``new_group(**kwargs)``) that this collective owns and works on."""
        if self._group is not None:
            raise RuntimeError(f"`{type(self).__name__}` already owns a group.")
        self._group = self.new_group(**kwargs)
        return self

    def teardown(self) -> Collective:
        """Destroy the group this collective owns."""
        if self._group is None:
            raise RuntimeError(f"`{type(self).__name__}` does not own a group to destroy.")
        self.destroy_group(self._group)
        self._group = None
        return self


class SingleDeviceCollective(Collective):
    """The collectives of one process: each returns its input (a gather, a one-element list)."""

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    def broadcast(self, tensor: Tensor, *_: Any, **__: Any) -> Tensor:
        return tensor

    def all_reduce(self, tensor: Tensor, *_: Any, **__: Any) -> Tensor:
        return tensor

    def reduce(self, tensor: Tensor, *_: Any, **__: Any) -> Tensor:
        return tensor

    def all_gather(self, tensor_list: list[Tensor], tensor: Tensor, **__: Any) -> list[Tensor]:
        return [tensor]

    def gather(self, tensor: Tensor, *_: Any, **__: Any) -> list[Tensor]:
        return [tensor]

    def scatter(self, tensor: Tensor, scatter_list: list[Tensor], *_: Any, **__: Any) -> Tensor:
        return scatter_list[0]

    def reduce_scatter(self, output: Tensor, input_list: list[Tensor], *_: Any, **__: Any) -> Tensor:
        return input_list[0]

    def all_to_all(self, output_tensor_list: list[Tensor], input_tensor_list: list[Tensor], *_: Any,
                   **__: Any) -> list[Tensor]:
        return input_tensor_list

    def send(self, *_: Any, **__: Any) -> None:
        pass

    def recv(self, tensor: Tensor, *_: Any, **__: Any) -> Tensor:
        return tensor

    def barrier(self, *_: Any, **__: Any) -> None:
        pass

    @classmethod
    def is_available(cls) -> bool:
        return True

    @classmethod
    def is_initialized(cls) -> bool:
        return True

    @classmethod
    def init_group(cls, **_: Any) -> None:
        pass

    @classmethod
    def new_group(cls, **_: Any) -> Any:  # a placeholder object: one process has no group to make
        return object()

    @classmethod
    def destroy_group(cls, group: CollectibleGroup) -> None:
        pass

    @classmethod
    def _convert_to_native_op(cls, op: str) -> str:
        return op


class TorchCollective(Collective):
    """``torch.distributed``'s collectives on the group this object owns (the default group until it creates one);
    each returns the tensor or list it filled. ``setup`` opens the default group (``MASTER_ADDR``/``MASTER_PORT``
    from ``main_address``/``main_port`` when not set) and ``teardown`` closes it again when this class opened it and
    no other group is left."""

    manages_default_group = False
    addr_key = "MASTER_ADDR"
    port_key = "MASTER_PORT"

    def __init__(self) -> None:
        if not dist.is_available():
            raise RuntimeError("Torch distributed is not available.")
        super().__init__()

    @property
    def group(self) -> Any:  # a torch ProcessGroup (torch's calls take that type, not the protocol)
        if self._group is None:
            self._group = dist.GroupMember.WORLD
        return super().group

    @property
    def rank(self) -> int:
        return dist.get_rank(self.group)

    @property
    def world_size(self) -> int:
        return dist.get_world_size(self.group)

    def broadcast(self, tensor: Tensor, src: int) -> Tensor:
        dist.broadcast(tensor, src, group=self.group)
        return tensor

    def all_reduce(self, tensor: Tensor, op: Union[str, ReduceOp, RedOpType] = "sum") -> Tensor:
        dist.all_reduce(tensor, op=self._convert_to_native_op(op), group=self.group)
        return tensor

    def reduce(self, tensor: Tensor, dst: int, op: Union[str, ReduceOp, RedOpType] = "sum") -> Tensor:
        dist.reduce(tensor, dst, op=self._convert_to_native_op(op), group=self.group)
        return tensor

    def all_gather(self, tensor_list: list[Tensor], tensor: Tensor) -> list[Tensor]:
        dist.all_gather(tensor_list, tensor, group=self.group)
        return tensor_list

    def gather(self, tensor: Tensor, gather_list: list[Tensor], dst: int = 0) -> list[Tensor]:
        dist.gather(tensor, gather_list, dst, group=self.group)
        return gather_list

    def scatter(self, tensor: Tensor, scatter_list: list[Tensor], src: int = 0) -> Tensor:
        dist.scatter(tensor, scatter_list, src, group=self.group)
        return tensor

    def reduce_scatter(self, output: Tensor, input_list: list[Tensor],
                       op: Union[str, ReduceOp, RedOpType] = "sum") -> Tensor:
        dist.reduce_scatter(output, input_list, op=self._convert_to_native_op(op), group=self.group)
        return output

    def all_to_all(self, output_tensor_list: list[Tensor], input_tensor_list: list[Tensor]) -> list[Tensor]:
        dist.all_to_all(output_tensor_list, input_tensor_list, group=self.group)
        return output_tensor_list

    def send(self, tensor: Tensor, dst: int, tag: int = 0) -> None:
        dist.send(tensor, dst, tag=tag, group=self.group)

    def recv(self, tensor: Tensor, src: int | None = None, tag: int = 0) -> Tensor:
        dist.recv(tensor, src, tag=tag, group=self.group)
        return tensor

    def all_gather_object(self, object_list: list[Any], obj: Any) -> list[Any]:
        dist.all_gather_object(object_list, obj, group=self.group)
        return object_list

    def broadcast_object_list(self, object_list: list[Any], src: int,
                              device: torch.device | None = None) -> list[Any]:
        dist.broadcast_object_list(object_list, src, group=self.group, device=device)
        return object_list

    def gather_object(self, obj: Any, object_gather_list: list[Any], dst: int = 0) -> list[Any]:
        dist.gather_object(obj, object_gather_list, dst, group=self.group)
        return object_gather_list

    def scatter_object_list(self, scatter_object_output_list: list[Any], scatter_object_input_list: list[Any],
                            src: int = 0) -> list[Any]:
        dist.scatter_object_list(scatter_object_output_list, scatter_object_input_list, src, group=self.group)
        return scatter_object_output_list

    def barrier(self, device_ids: list[int] | None = None) -> None:
        if self.group == dist.GroupMember.NON_GROUP_MEMBER:
            return
        dist.barrier(group=self.group, device_ids=device_ids)

    def monitored_barrier(self, timeout: datetime.timedelta | None = None, wait_all_ranks: bool = False) -> None:
        dist.monitored_barrier(group=self.group, timeout=timeout, wait_all_ranks=wait_all_ranks)

    def setup(self, main_address: str | None = None, main_port: str | None = None, **kwargs: Any) -> TorchCollective:
        if self.is_initialized():
            return self
        exported = []
        for key, value in ((self.addr_key, main_address), (self.port_key, main_port)):
            if value is not None and key not in os.environ:
                os.environ[key] = str(value)
                exported.append(key)
        super().setup(**kwargs)
        TorchCollective.manages_default_group = True  # on the class: every instance knows who opened it
        for key in exported:
            os.environ.pop(key, None)
        return self

    def teardown(self) -> TorchCollective:
        member = self.group != dist.GroupMember.NON_GROUP_MEMBER
        super().teardown()
        default = dist.GroupMember.WORLD
        if member and TorchCollective.manages_default_group and default is not None and _only_default_group_left():
            self.destroy_group(default)
            TorchCollective.manages_default_group = False
        elif TorchCollective.manages_default_group and default is None:
            TorchCollective.manages_default_group = False
        return self

    @classmethod
    def is_available(cls) -> bool:
        return dist.is_available()

    @classmethod
    def is_initialized(cls) -> bool:
        return cls.is_available() and dist.is_initialized()

    @classmethod
    def init_group(cls, **kwargs: Any) -> None:
        dist.init_process_group(**kwargs)

    @classmethod
    def new_group(cls, **kwargs: Any) -> CollectibleGroup:
        return dist.new_group(**kwargs)

    @classmethod
    def destroy_group(cls, group: CollectibleGroup) -> None:
        if _is_live_group(group):  # a process outside the group holds a placeholder object, not a group
            dist.destroy_process_group(group)

    @classmethod
    def _convert_to_native_op(cls, op: Union[str, ReduceOp, RedOpType]) -> Union[ReduceOp, RedOpType]:
        """A ``ReduceOp`` from its name (``"sum"``, ``"max"``, ...); a ``ReduceOp`` unchanged; else ``ValueError``."""
        if isinstance(op, (ReduceOp, RedOpType)):
            return op
        if not isinstance(op, str):
            raise ValueError(f"Unsupported op {op!r} of type {type(op).__name__}")
        value = getattr(ReduceOp, op.upper(), None)
        if value is None:
            raise ValueError(f"op {op.upper()!r} is not a member of `ReduceOp`")
        return value


def _is_live_group(group: object) -> TypeGuard[dist.ProcessGroup]:
    with contextlib.suppress(Exception):
        return group in dist.distributed_c10d._world.pg_map
    return isinstance(group, dist.ProcessGroup)


def _only_default_group_left() -> bool:
    with contextlib.suppress(Exception):
        return len(dist.distributed_c10d._world.pg_map) == 1
    return True
