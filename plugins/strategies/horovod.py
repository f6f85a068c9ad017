"""Horovod: processes started by horovodrun (or mpirun); gradients averaged by ``hvd.DistributedOptimizer``.

Horovod has no process group of ``torch.distributed``: ranks come from ``hvd.init()``, gradients are
all-reduced by hooks the distributed optimizer puts on every parameter, and every collective of the
Strategy interface goes through ``hvd.*``. The module is not wrapped, so its state dict, and with it a
checkpoint, has the same keys as under any other strategy.

When gradients are complete: the Trainer's last backward of an accumulation window runs outside
``no_backward_sync``; right after it this strategy calls ``optimizer.synchronize()``, so
``on_after_backward``, loss unscaling and gradient clipping all see averaged gradients (as under DDP),
and the step itself runs in ``optimizer.skip_synchronize()``.

``horovod`` is imported only when the strategy sets up, never by ``import plugins`` or ``import trainer``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.launchers.horovod import HorovodLauncher
from plugins.precision.base import Precision
from plugins.strategies.base import Strategy
from plugins.strategies.horovod_available import INSTALL_COMMAND, horovod_importable, horovod_missing_message  # noqa: F401 (re-exported)
from plugins.strategies.parallel import report_peer_failures_briefly

COMPRESSIONS = ("none", "fp16")
OPS = ("average", "sum", "adasum")
_REDUCE_OPS = ("mean", "sum", "max", "min")


def _hvd() -> Any:
    try:
        import horovod.torch as hvd
    except ImportError as err:
        raise ImportError(f"{horovod_missing_message()} ({type(err).__name__}: {err})") from None
    return hvd


def _choice(name: str, value: Any, valid: tuple[str, ...], example: str) -> str:
    text = str(value).lower()
    if text not in valid:
        raise ValueError(
            f"HorovodStrategy({name}={value!r}) is not valid; use one of {', '.join(valid)} (e.g. strategy.{name}={example})."
        )
    return text


class HorovodStrategy(Strategy):
    """Data parallel through Horovod: ``hvd.DistributedOptimizer``, ``hvd.broadcast_*`` and ``hvd.*`` collectives.

    ``backward_passes_per_step`` follows ``Trainer(accumulate_grad_batches=...)`` unless set; set to a
    different value it is an error, since Horovod would reduce on the wrong backward pass. The learning
    rate is never scaled by the number of ranks: scale it in ``configure_optimizers`` if you want that.
    """

    name = "horovod"

    def __init__(
        self,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
        compression: str = "none",
        op: str = "average",
        backward_passes_per_step: int | None = None,
        gradient_predivide_factor: float = 1.0,
    ) -> None:
        super().__init__(accelerator=accelerator, precision=precision)
        self.compression = _choice("compression", compression, COMPRESSIONS, "fp16")
        self.op = _choice("op", op, OPS, "average")
        if backward_passes_per_step is not None and (
            isinstance(backward_passes_per_step, bool) or not isinstance(backward_passes_per_step, int)
            or backward_passes_per_step < 1
        ):
            raise ValueError(
                f"HorovodStrategy(backward_passes_per_step={backward_passes_per_step!r}) must be an int >= 1 or null "
                "(null: Trainer(accumulate_grad_batches)), e.g. strategy.backward_passes_per_step=null"
            )
        self.backward_passes_per_step = backward_passes_per_step
        if isinstance(gradient_predivide_factor, bool) or not isinstance(gradient_predivide_factor, (int, float)) \
                or gradient_predivide_factor <= 0:
            raise ValueError(
                f"HorovodStrategy(gradient_predivide_factor={gradient_predivide_factor!r}) must be a number > 0, "
                "e.g. strategy.gradient_predivide_factor=1.0"
            )
        if gradient_predivide_factor != 1.0 and self.op != "average":
            raise ValueError(
                f"HorovodStrategy(gradient_predivide_factor={gradient_predivide_factor}) only applies to op='average' "
                f"(op={self.op!r}); use strategy.gradient_predivide_factor=1.0 or strategy.op=average."
            )
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        self._optimizers: list[Any] = []
        self._built_from: dict[int, torch.optim.Optimizer] = {}  # wrapper -> the user's optimizer
        self._no_sync = False
        if not horovod_importable():  # after the options: a bad option is reported even where Horovod is absent
            raise ImportError(horovod_missing_message())

    # --- who am I: horovod's answer once initialised, the launcher's variables before -----------
    def _initialized(self) -> bool:
        import sys

        hvd = sys.modules.get("horovod.torch")
        return hvd is not None and hvd.is_initialized()

    @property
    def world_size(self) -> int:
        if self._initialized():
            return _hvd().size()
        env = self.environment
        if env is not None and env.creates_processes_externally:
            return env.world_size()
        return len(self.device_ids) * self.num_nodes

    @property
    def global_rank(self) -> int:
        if self._initialized():
            return _hvd().rank()
        env = self.environment
        return env.global_rank() if env is not None and env.creates_processes_externally else 0

    @property
    def local_rank(self) -> int:
        if self._initialized():
            return _hvd().local_rank()
        env = self.environment
        return env.local_rank() if env is not None and env.creates_processes_externally else 0

    @property
    def root_device(self) -> torch.device:
        if self.accelerator is None:
            return torch.device("cpu")
        return self.accelerator.device_for(self.local_rank, self.device_ids)

    @property
    def launcher(self) -> Any:
        """horovodrun on this machine when a plain ``python`` run asks for several processes."""
        env = self.environment
        if env is None or env.creates_processes_externally or self.world_size == 1:
            return None
        return HorovodLauncher(nprocs=len(self.device_ids), num_nodes=self.num_nodes)

    # --- lifecycle ------------------------------------------------------------------------------
    def setup_environment(self) -> None:
        hvd = _hvd()
        if self.launcher is not None:
            raise RuntimeError(
                f"HorovodStrategy with {self.world_size} processes was set up in the launching process; the Trainer "
                "starts the workers first (Trainer.fit/validate/test/predict do)."
            )
        expected = self.world_size
        hvd.init()
        if hvd.size() != expected:
            raise RuntimeError(
                f"Horovod started {hvd.size()} process(es) but this run expects {expected} (devices x num_nodes); "
                f"start it with `horovodrun -np {expected} ...` or pass devices/num_nodes to match."
            )
        if self.op == "adasum" and hvd.size() > 1 and not hvd.mpi_enabled():
            raise ValueError(
                "HorovodStrategy(op='adasum') needs Horovod's MPI controller (Adasum has no gloo implementation), but "
                f"this job runs {'without MPI built in' if not hvd.mpi_built() else 'over gloo'}. Use strategy.op=average, "
                "or build Horovod where mpicxx exists (python -m trainer install-horovod --rebuild) and start with "
                "horovodrun --mpi (or mpirun)."
            )
        super().setup_environment()  # pins this process to the device of its local rank
        report_peer_failures_briefly(hvd.rank())

    def configure_optimization(
        self, accumulate_grad_batches: int, gradient_clip_val: float | None, gradient_clip_algorithm: str | None,
    ) -> None:
        """The Trainer's accumulation must be Horovod's; a user's own loop (Fabric) sets ``backward_passes_per_step``
        to the backward passes it runs per ``optimizer.step()`` (under ``no_backward_sync`` but the last)."""
        passes = self.backward_passes_per_step
        if passes is not None and passes != accumulate_grad_batches:
            raise ValueError(
                f"HorovodStrategy(backward_passes_per_step={passes}) differs from Trainer(accumulate_grad_batches="
                f"{accumulate_grad_batches}): Horovod would average gradients on the wrong backward pass. Use "
                f"strategy.backward_passes_per_step=null (it follows accumulate_grad_batches)."
            )

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        module = super().setup_module(module)
        if self.world_size > 1:
            _hvd().broadcast_parameters(module.state_dict(), root_rank=0)
        return module

    def setup_optimizers(self, optimizers: list[torch.optim.Optimizer]) -> list[torch.optim.Optimizer]:
        if not optimizers:
            return optimizers
        hvd = _hvd()
        names = {id(p): n for n, p in self._state_module().named_parameters()}
        wrapped = []
        for optimizer in optimizers:
            named = [(names.get(id(p), f"param.{g}.{i}"), p) for g, group in enumerate(optimizer.param_groups)
                     for i, p in enumerate(group["params"])]
            options: dict[str, Any] = {}
            if self.op == "average":
                options["gradient_predivide_factor"] = self.gradient_predivide_factor
            wrapped.append(hvd.DistributedOptimizer(
                optimizer, named_parameters=named,
                compression=hvd.Compression.fp16 if self.compression == "fp16" else hvd.Compression.none,
                backward_passes_per_step=self._passes_per_step(),
                op={"average": hvd.Average, "sum": hvd.Sum, "adasum": hvd.Adasum}[self.op], **options,
            ))
            self._broadcast_optimizer_state(wrapped[-1])
            self._built_from[id(wrapped[-1])] = optimizer
        self._optimizers = wrapped
        return wrapped

    def _passes_per_step(self) -> int:
        """Backward passes Horovod counts before it averages: the option, else the Trainer's accumulation."""
        return self.backward_passes_per_step or self.accumulate_grad_batches

    def _broadcast_optimizer_state(self, optimizer: Any) -> None:
        """Rank 0's optimizer state to every rank; a fresh optimizer has none to send.

        ``hvd.broadcast_optimizer_state`` creates missing state by taking a step with zero gradients,
        which moves AdamW's weights (decay) and Adam's step count; a fresh optimizer is the same on
        every rank, so there is nothing to broadcast and no such step is taken.
        """
        if self.world_size > 1 and optimizer.state_dict()["state"]:
            _hvd().broadcast_optimizer_state(optimizer, root_rank=0)

    def teardown(self) -> None:
        self._optimizers, self._built_from = [], {}
        super().teardown()

    # --- one step -------------------------------------------------------------------------------
    def no_backward_sync(self, enabled: bool) -> contextlib.AbstractContextManager:
        """Accumulation: Horovod's hooks count backward passes themselves; only remember not to synchronize."""
        if enabled and self._passes_per_step() == 1:  # Horovod would fail on the next backward with an AssertionError
            raise ValueError(
                "HorovodStrategy(backward_passes_per_step=1) averages the gradients of every backward pass, so they "
                "cannot accumulate under no_backward_sync; for N backward passes per optimizer step pass "
                "HorovodStrategy(backward_passes_per_step=N) (the Trainer sets it from accumulate_grad_batches)."
            )
        return _flag(self, enabled)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        super().backward(loss, *args, **kwargs)
        if not self._no_sync:
            self._synchronize()

    def _synchronize(self) -> None:
        for optimizer in self._optimizers:
            if self._synchronizes(optimizer) and not optimizer._synchronized:
                optimizer.synchronize()

    def _synchronizes(self, optimizer: Any) -> bool:
        """Horovod's optimizer with averaged gradients to wait for (Adasum's combines updates inside ``step``)."""
        return hasattr(optimizer, "skip_synchronize") and self.op != "adasum"

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any]) -> Any:
        if not self._synchronizes(optimizer):  # one process (a plain optimizer), or Adasum
            return super().optimizer_step(optimizer, closure)
        # A loop's own backward (Fabric) ran before this step and waited for the averages; Horovod's step() clears
        # the flag before it calls the closure, so it is read here
        synchronized = optimizer._synchronized

        def closure_synchronized() -> Any:
            result = closure()
            if not (synchronized or optimizer._synchronized):  # a backward that did not pass through this strategy
                optimizer.synchronize()
            return result

        with optimizer.skip_synchronize():
            out = self.precision.optimizer_step(optimizer, closure_synchronized)
        # the next backward's gradients are new: its all-reduces are waited for again (a flag left set made a loop's
        # clip_gradients read gradients still being averaged)
        optimizer._synchronized = False
        # The wrapper shares the user's param groups, so LR schedulers built on the user's optimizer drive it;
        # torch's schedulers watch that optimizer for their "scheduler stepped before optimizer" warning.
        original = self._built_from.get(id(optimizer))
        if original is not None:
            original._opt_called = True
        return out

    def clip_gradients(
        self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, value: float, algorithm: str
    ) -> None:
        if self.op == "adasum" and self.world_size > 1:
            raise ValueError(
                "Gradient clipping does not apply with HorovodStrategy(op='adasum'): Adasum applies each rank's update "
                "during backward, before any clipping. Use strategy.op=average, or Trainer(gradient_clip_val=None)."
            )
        if self._synchronizes(optimizer) and not optimizer._synchronized:
            optimizer.synchronize()  # clip (and unscale) the averaged gradients, never a rank's own
        super().clip_gradients(module, optimizer, value, algorithm)

    # --- state layout: the module is not wrapped; after a resume rank 0's state is broadcast ------
    def load_module_state_dict(self, module: torch.nn.Module, state: Any, strict: bool = True) -> None:
        super().load_module_state_dict(module, state, strict)
        if self.world_size > 1:
            _hvd().broadcast_parameters(module.state_dict(), root_rank=0)

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer, state: Any) -> None:
        super().load_optimizer_state_dict(optimizer, state)
        self._broadcast_optimizer_state(optimizer)
        original = self._built_from.get(id(optimizer))
        if original is not None:
            # loading made new param-group dicts; LR schedulers hold the user's optimizer: share them again
            original.param_groups = optimizer.param_groups

    # --- collectives ----------------------------------------------------------------------------
    def _ready(self) -> bool:
        return self._initialized() and _hvd().size() > 1

    def all_reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        if not self._ready():
            return tensor
        hvd = _hvd()
        op = str(op).lower()
        if op not in _REDUCE_OPS:
            raise ValueError(f"all_reduce(op={op!r}) is not supported; use one of {', '.join(_REDUCE_OPS)}.")
        out = tensor.detach() if isinstance(tensor, torch.Tensor) else torch.tensor(tensor)
        if op == "mean" and not out.is_floating_point():
            out = out.float()
        reduce_op = {"mean": hvd.Average, "sum": hvd.Sum, "max": hvd.Max, "min": hvd.Min}[op]
        return hvd.allreduce(out, op=reduce_op)

    def all_gather(self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False) -> torch.Tensor:
        if group is not None:
            raise ValueError("strategy=horovod gathers over all ranks: all_gather(group=...) is not supported; pass "
                             "group=None, or use strategy='ddp' for torch.distributed process groups.")
        if not self._ready():
            return tensor.unsqueeze(0)
        # Horovod's allgather is differentiable: detach unless gradients should flow back
        return _hvd().allgather((tensor if sync_grads else tensor.detach()).contiguous().unsqueeze(0))

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not self._ready():
            return [obj]
        return list(_hvd().allgather_object(obj))

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        if not self._ready():
            return obj
        return _hvd().broadcast_object(obj, root_rank=src)

    def barrier(self, name: str | None = None) -> None:
        if self._ready():
            _hvd().barrier()

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        if not self._ready():
            return decision
        hvd = _hvd()
        flag = hvd.allreduce(torch.tensor(int(bool(decision))), op=hvd.Min if all else hvd.Max)
        return bool(flag.item())

    def start_vote(self, flags: list[bool]) -> Callable[[], list[bool]]:
        if not self._ready():
            return super().start_vote(flags)
        hvd = _hvd()
        handle = hvd.allreduce_async(torch.tensor([int(bool(f)) for f in flags]), op=hvd.Max)
        return lambda: [bool(v) for v in hvd.synchronize(handle).tolist()]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"compression={self.compression!r}, op={self.op!r})")


@contextlib.contextmanager
def _flag(strategy: HorovodStrategy, enabled: bool):
    previous = strategy._no_sync
    strategy._no_sync = enabled
    try:
        yield
    finally:
        strategy._no_sync = previous
