"""The strategy as both front ends (the Trainer and Fabric) use it, written once: built from the user's arguments, a
module and its optimizers set up on it, a step's forward wrapper, batches moved to its device, backward under its
precision, and gathers across its processes. With ``distributed/launch.py`` (the processes) and
``checkpointing/strategy_state.py`` (state in the strategy's layout) this is the one layer between the front ends and
the plugins (tests/trainer/test_one_layer.py checks both call it); ``plugins/`` never imports it.

``plugins.strategies`` (and ``plugins.selection``, which imports it) and ``trainer.module`` are imported inside the
functions that need them: this module is reached from ``trainer.module`` (``Module.all_gather``), and
``import trainer`` must not import the strategies (tests/trainer/test_imports.py), nor may the imports form a circle
(tests/trainer/test_import_graph.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from plugins.apply_func import apply_to_collection
from plugins.checkpoint_io import CheckpointIO
from plugins.environments.base import ClusterEnvironment
from plugins.precision.base import Precision

if TYPE_CHECKING:
    from plugins.accelerators.base import Accelerator
    from plugins.strategies.base import Strategy

_T = TypeVar("_T")


def resolve_strategy(
    accelerator: str | Accelerator, strategy: str | Strategy, devices: int | str | list[int], num_nodes: int,
    precision: str | int | Precision, plugins: object, caller: str,
) -> Strategy:
    """The strategy (holding accelerator, precision, environment) for a front end's arguments.

    ``plugins`` may hold one cluster environment, one precision and one checkpoint I/O object (Lightning's way
    to pass them); anything else is one clear error naming ``caller``.
    """
    from plugins.selection import resolve_plugins  # local import: `from trainer import Trainer, Module` loads no strategy plugin (tests/trainer/test_imports.py)

    items = [] if plugins is None else list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    environment = checkpoint_io = None
    for item in items:
        if isinstance(item, ClusterEnvironment) and environment is None:
            environment = item
        elif isinstance(item, Precision) and isinstance(precision, (str, int)) and str(precision) == "32-true":
            precision = item
        elif isinstance(item, CheckpointIO) and checkpoint_io is None:
            checkpoint_io = item
        else:
            raise ValueError(
                f"{caller}(plugins=[..., {item!r}, ...]): pass at most one ClusterEnvironment, one Precision and one "
                "CheckpointIO; accelerator, strategy and precision names go to their own arguments."
            )
    resolved = resolve_plugins(accelerator, devices, num_nodes, strategy, precision, environment=environment)
    if checkpoint_io is not None:
        resolved.checkpoint_io = checkpoint_io
    return resolved


class ForwardRoot(torch.nn.Module):
    """Holds a plain module whose ``forward`` a loop calls: strategies set up a Trainer's Module, whose children
    are what the step calls (FSDP shards each child as a root), so a plain module becomes that child. Other
    methods are the held module's, so a strategy can run them too (DDP's ``ddp("training_step", ...)``)."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: object, **kwargs: object) -> Any:
        return self.module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["module"], name)


def setup_module(strategy: Strategy, module: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """``(module, holder)``: the module placed/wrapped by the strategy (its parameters now the strategy's), and what
    the strategy set up, for ``step_function``. A module that is not a Trainer Module is set up inside a
    ``ForwardRoot``."""
    from trainer.module import Module  # local import: trainer.module imports this module (Module.backward, all_gather)

    holder = module if isinstance(module, Module) else ForwardRoot(module)
    holder = strategy.setup_module(holder)
    return (holder if isinstance(module, Module) else holder.module), holder


def setup_optimizers(strategy: Strategy, optimizers: list[torch.optim.Optimizer]) -> list[torch.optim.Optimizer]:
    """The optimizers of the module ``setup_module`` set up last, made ready for the strategy: Horovod's
    ``DistributedOptimizer`` around each, or DeepSpeed's engine built around that module and its one optimizer
    (whose ZeRO optimizer comes back)."""
    return strategy.setup_optimizers(list(optimizers))


def step_function(strategy: Strategy, holder: torch.nn.Module, name: str) -> Callable[..., Any]:
    """The callable that runs ``holder.<name>`` the strategy's way: through DDP's wrapper for the methods that
    produce gradients (``training_step``, ``forward``), under the precision's autocast."""
    return strategy.step_function(holder, name)


def overridden(strategy: Strategy, name: str) -> bool:
    """Whether the strategy's method ``name`` differs from the base ``Strategy``'s: where it does not, a loop may
    bind the direct call the base method would make once, instead of a layer per step."""
    from plugins.strategies.base import Strategy  # local import: `from trainer import Trainer, Module` loads no strategy plugin (tests/trainer/test_imports.py)

    return getattr(type(strategy), name) is not getattr(Strategy, name)


def move_to_device(strategy: Strategy, batch: _T) -> _T:
    """``batch`` (tensors in any collection) on the strategy's device, in the precision's input dtype."""
    return strategy.batch_to_device(batch)


def backward_function(strategy: Strategy) -> Callable[..., None]:
    """What ``backward(strategy, loss, ...)`` runs, resolved once so a loop calls it with no layer in between:
    ``Tensor.backward`` itself when neither the strategy nor the precision changes backward (what
    ``Strategy.backward`` -> ``Precision.backward`` would call), else the strategy's."""
    if not overridden(strategy, "backward") and type(strategy.precision).backward is Precision.backward:
        return torch.Tensor.backward
    return strategy.backward


def backward(strategy: Strategy, loss: torch.Tensor, *args: object, **kwargs: object) -> None:
    """``loss.backward`` under the precision (loss scaling) and the strategy (an engine's own backward)."""
    backward_function(strategy)(loss, *args, **kwargs)


def gather(strategy: Strategy, data: object, device: torch.device, group: Any | None = None, sync_grads: bool = False,
           ) -> Any:
    """Every process's ``data`` (tensors, numbers, collections), each tensor stacked along a new first dimension;
    on one process the data come back as they are (numbers as tensors on ``device``)."""
    data = as_tensors(data, device)
    if strategy.world_size == 1:
        return data
    return apply_to_collection(data, torch.Tensor, strategy.all_gather, group=group, sync_grads=sync_grads)


def as_tensors(data: object, device: torch.device) -> Any:
    """Numbers (bool, int, float) in ``data`` as tensors, every tensor on ``device``: what collectives take."""
    for kind, dtype in ((bool, torch.uint8), (int, torch.int), (float, torch.float)):  # CONVERSION_DTYPES
        data = apply_to_collection(data, kind, lambda v, dt=dtype: torch.tensor(v, dtype=dt, device=device))
    return apply_to_collection(data, torch.Tensor, lambda t: t.to(device))
