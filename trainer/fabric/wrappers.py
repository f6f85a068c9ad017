"""What ``Fabric.setup*`` hands back: the user's module, optimizer and loader, run the strategy's way.

Each wrapper forwards every attribute it does not define to the object it wraps, so user code keeps
calling ``model.some_method()``, ``optimizer.param_groups`` or ``len(loader)`` as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from plugins.precision.half import MixedPrecision
from trainer.module import Module
from trainer.utilities.zero_edit import lightning_defaults
from trainer.distributed.strategy import ForwardRoot, move_to_device

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from plugins.precision.base import Precision
    from plugins.strategies.base import Strategy

_T = TypeVar("_T")

# a Trainer Module's methods that run a step: called on the set-up module, they run the strategy's way (as forward)
STEP_METHODS = ("training_step", "validation_step", "test_step", "predict_step")
_OWN = ("_forward_module", "_original_module", "_fabric_")


class FabricModule(torch.nn.Module):
    """``forward`` (and methods marked with ``mark_forward_method``, and a Trainer Module's ``*_step``) go through
    the strategy (DDP's wrapper, FSDP's sharded root, autocast); ``state_dict`` and every other attribute are the
    original module's."""

    def __init__(self, holder: torch.nn.Module, original: torch.nn.Module, strategy: Strategy) -> None:
        super().__init__()
        # registered as Lightning registers it: the strategy's wrapper, or the module itself where the strategy left
        # it as it was, so parameter names are Lightning's (``_forward_module.<name>``); the holder runs the steps
        self._forward_module = original if isinstance(holder, ForwardRoot) and holder.module is original else holder
        self._original_module = original
        self.__dict__["_fabric_holder"] = holder  # not a submodule: its parameters are the ones above
        self._fabric_strategy = strategy
        self._fabric_forward = strategy.step_function(holder, "forward")
        self._fabric_marked = set(STEP_METHODS) if isinstance(original, Module) else set()

    @property
    def module(self) -> torch.nn.Module:
        return self._original_module

    @property
    def device(self) -> torch.device:
        """Where the module is: its first parameter's (or buffer's) device; the strategy's device for a module
        without tensors (Lightning's wrapper reports the device ``setup`` moved it to)."""
        for tensors in (self._original_module.parameters(), self._original_module.buffers()):
            for tensor in tensors:
                return tensor.device
        return self._fabric_strategy.root_device

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return _precise(self._fabric_strategy.precision, self._fabric_forward, args, kwargs)

    def mark_forward_method(self, method: str | Callable[..., object]) -> None:
        """Run ``method`` the way ``forward`` runs (gradient synchronisation, autocast) when called on this module."""
        name = method if isinstance(method, str) else method.__name__
        if name == "forward":
            raise ValueError("You cannot mark the forward method itself as a forward method.")
        if not callable(getattr(self._original_module, name, None)):
            raise AttributeError(f"You marked '{name}' as a forward method, but `{type(self._original_module).__name__}."
                                 f"{name}` does not exist or is not a method.")
        self._fabric_marked.add(name)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._original_module.state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._original_module.load_state_dict(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith(_OWN):
            return super().__getattr__(name)
        if name in self.__dict__.get("_fabric_marked", ()):
            strategy = self._fabric_strategy
            run = strategy.step_function(self.__dict__["_fabric_holder"], name)
            return lambda *args, **kwargs: _precise(strategy.precision, run, args, kwargs)
        original = super().__getattr__("_original_module")
        return getattr(original, name)

    def __setattr__(self, name: str, value: Any) -> None:
        ours = name in self.__dict__ or name.startswith(_OWN)
        if ours or "_original_module" not in self.__dict__.get("_modules", {}):
            return super().__setattr__(name, value)
        setattr(self._original_module, name, value)


def _precise(precision: Precision, run: Callable[..., object], args: tuple, kwargs: dict) -> Any:
    """Inputs in the precision's dtype in, outputs back in the default dtype out (Lightning's Fabric module does
    both, so a "64-true" or "bf16-mixed" module meets and returns float32 tensors in the user's loop). In the
    zero-edit mode, under mixed precision, the floating-point inputs also take the autocast dtype, as Lightning
    Fabric's ``MixedPrecision`` casts them; Relay's own Fabric leaves them as given (autocast casts per operation),
    so a Fabric loop and ``Trainer.fit`` end with the same weights."""
    args, kwargs = precision.convert_input((args, kwargs))
    if not isinstance(precision, MixedPrecision) or not lightning_defaults():
        return precision.convert_output(run(*args, **kwargs))
    args, kwargs = _floats_to((args, kwargs), precision.dtype)
    return _floats_to(precision.convert_output(run(*args, **kwargs)), torch.get_default_dtype())


def _floats_to(data: _T, dtype: torch.dtype) -> _T:
    from lightning_utilities.core.apply_func import apply_to_collection

    return apply_to_collection(data, torch.Tensor, lambda t: t.to(dtype) if torch.is_floating_point(t) else t)


class FabricOptimizer:
    """``step`` runs through the strategy and precision (loss scaling, an engine's own step)."""

    def __init__(self, optimizer: torch.optim.Optimizer, strategy: Strategy) -> None:
        self._optimizer = optimizer
        self._strategy = strategy
        # the class of the wrapped optimizer, so isinstance checks in user code keep working
        self.__class__ = type("Fabric" + type(optimizer).__name__, (FabricOptimizer, type(optimizer)), {})

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._optimizer

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._strategy.optimizer_step(self._optimizer, closure or _no_closure)

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        """The wrapped optimizer's, called as the user called it: Horovod's ``DistributedOptimizer.zero_grad`` takes
        no ``set_to_none``."""
        self._optimizer.zero_grad(*args, **kwargs)

    def state_dict(self) -> dict[str, Any]:
        return self._optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._optimizer.load_state_dict(state_dict)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_optimizer"], name)

    # No __setattr__: what is set on the wrapper stays on the wrapper, as on Lightning's. A torch LR scheduler
    # made on the wrapper patches ``step`` on the object it was given; forwarded to the wrapped optimizer, that
    # patch made the strategy's ``optimizer.step()`` call the wrapper's step again, without end.


def _no_closure() -> None:
    return None


class FabricDataLoader:
    """Iterates the loader, moving each batch to the device; ``set_epoch`` reaches a distributed sampler on
    every new pass, so shuffling differs per epoch and agrees across ranks."""

    def __init__(self, loader: DataLoader, strategy: Strategy | None) -> None:
        self._loader = loader
        self._strategy = strategy  # None: batches stay where they are
        self._epoch = 0

    @property
    def device(self) -> torch.device | None:
        return self._strategy.root_device if self._strategy is not None else None

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[Any]:
        sampler = getattr(self._loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self._epoch)
        self._epoch += 1
        if self._strategy is None:
            yield from self._loader
            return
        for batch in self._loader:
            yield move_to_device(self._strategy, batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_loader"], name)


def is_wrapped(obj: object) -> bool:
    """Whether ``obj`` came back from ``Fabric.setup*`` (a wrapped module, optimizer or loader)."""
    return isinstance(obj, (FabricModule, FabricOptimizer, FabricDataLoader))


def unwrap(obj: Any) -> Any:
    if isinstance(obj, FabricModule):
        return obj._original_module
    if isinstance(obj, FabricOptimizer):
        return obj.optimizer
    return obj
