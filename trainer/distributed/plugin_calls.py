"""The calls both front ends (the Trainer and Fabric) make into the plugins, written once.

Building the strategy from the user's arguments, starting or joining the processes, setting a module up,
moving batches, backward under the precision, gathering, and saving or loading state in the strategy's
(possibly sharded) layout: each is one function here, so neither front end owns a private copy
(tests/trainer/test_one_layer.py checks both call these). ``plugins/`` never imports this module; it only
talks to the plugins' small interfaces.

``plugins.strategies`` (and ``plugins.selection``, which imports it) and ``trainer.module`` are imported inside the
functions that need them: this module is reached from ``trainer.module`` (``Module.all_gather``) and
``trainer.checkpointing.files``, and ``import trainer`` must not import the strategies (tests/trainer/test_imports.py),
nor may the imports form a circle (tests/trainer/test_import_graph.py).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from lightning_utilities.core.apply_func import apply_to_collection

from plugins.checkpoint_io import CheckpointIO
from plugins.environments.base import ClusterEnvironment
from plugins.environments.torchelastic import TorchElasticEnvironment
from plugins.precision.base import Precision
from trainer.errors import CheckpointNotFoundError, MisconfigurationError
from trainer.distributed.launch import launch_workers_and_exit, watch_launcher
from trainer.distributed.ranks import set_rank_zero_only

if TYPE_CHECKING:
    from plugins.strategies.base import Strategy


def resolve_strategy(
    accelerator: Any, strategy: Strategy, devices: Any, num_nodes: int, precision: Any, plugins: Any, caller: str,
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


def start_processes(strategy: Strategy, function: Callable[..., Any] | None, args: tuple[Any, ...],
                    carrier: Any, join: bool = True) -> tuple[bool, Any]:
    """Start the workers when this process must (``(True, rank 0's result)``), else ``(False, None)``.

    A re-running launcher (plain ``python script.py`` with several processes) runs the program again in
    every worker and ends this process with the group's exit code, as torchrun would. A spawning launcher
    (``ddp_spawn``) runs ``function(carrier, *args)`` in every worker (``carrier.strategy`` is the strategy) and
    hands rank 0's result back; with ``join`` the worker joins the group first, else ``function`` joins it
    (``join_processes``) when its own start-up allows (the Trainer plans the call first).
    """
    launcher = getattr(strategy, "launcher", None)
    if launcher is None:
        return False, None
    if hasattr(launcher, "launch_function"):
        environment, strategy.environment = strategy.environment, None  # holds os.environ: not picklable
        try:
            return True, launcher.launch_function(_spawned, carrier, function, args, join)
        finally:
            strategy.environment = environment
    launch_workers_and_exit(launcher)
    return True, None  # not reached


def spawn_function(launcher: Any, function: Callable[..., Any], *args: Any) -> Any:
    """Run ``function(*args)`` in the processes a spawning launcher starts; rank 0's result comes back (for a
    launcher not held by a strategy: Lightning's ``_MultiProcessingLauncher`` in the zero-edit mode)."""
    return launcher.launch_function(function, *args)


def _spawned(carrier: Any, function: Callable[..., Any], args: tuple[Any, ...], join: bool) -> Any:
    carrier.strategy.environment = TorchElasticEnvironment()  # the spawn launcher set torchrun's variables
    if join:
        join_processes(carrier.strategy)
    return function(carrier, *args)


def join_processes(strategy: Strategy, begin: bool = True) -> None:
    """In a worker (or the only process): die with Relay's launcher, join the group, select the device; with
    ``begin``, start-up is over at once (collectives wait at most the strategy's ``timeout`` from here on), else
    the caller calls ``strategy.begin_training()`` once its own start-up (loading a checkpoint) is done."""
    watch_launcher()
    strategy.setup_environment()
    set_rank_zero_only(strategy.global_rank)
    if begin:
        strategy.begin_training()


class ForwardRoot(torch.nn.Module):
    """Holds a plain module whose ``forward`` a loop calls: strategies set up a Trainer's Module, whose children
    are what the step calls (FSDP shards each child as a root), so a plain module becomes that child. Other
    methods are the held module's, so a strategy can run them too (DDP's ``ddp("training_step", ...)``)."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
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


def move_to_device(strategy: Strategy, batch: Any) -> Any:
    """``batch`` (tensors in any collection) on the strategy's device, in the precision's input dtype."""
    return strategy.batch_to_device(batch)


def backward_function(strategy: Strategy) -> Callable[..., None]:
    """What ``backward(strategy, loss, ...)`` runs, resolved once so a loop calls it with no layer in between:
    ``Tensor.backward`` itself when neither the strategy nor the precision changes backward (what
    ``Strategy.backward`` -> ``Precision.backward`` would call), else the strategy's."""
    if not overridden(strategy, "backward") and type(strategy.precision).backward is Precision.backward:
        return torch.Tensor.backward
    return strategy.backward


def backward(strategy: Strategy, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
    """``loss.backward`` under the precision (loss scaling) and the strategy (an engine's own backward)."""
    backward_function(strategy)(loss, *args, **kwargs)


def gather(strategy: Strategy, data: Any, device: torch.device, group: Any = None, sync_grads: bool = False) -> Any:
    """Every process's ``data`` (tensors, numbers, collections), each tensor stacked along a new first dimension;
    on one process the data come back as they are (numbers as tensors on ``device``)."""
    data = as_tensors(data, device)
    if strategy.world_size == 1:
        return data
    return apply_to_collection(data, torch.Tensor, strategy.all_gather, group=group, sync_grads=sync_grads)


def as_tensors(data: Any, device: torch.device) -> Any:
    """Numbers (bool, int, float) in ``data`` as tensors, every tensor on ``device``: what collectives take."""
    for kind, dtype in ((bool, torch.uint8), (int, torch.int), (float, torch.float)):  # CONVERSION_DTYPES
        data = apply_to_collection(data, kind, lambda v, dt=dtype: torch.tensor(v, dtype=dt, device=device))
    return apply_to_collection(data, torch.Tensor, lambda t: t.to(device))


def save_state(strategy: Strategy, path: str | os.PathLike, checkpoint: dict[str, Any],
               layout_keys: tuple[str, ...]) -> None:
    """Write ``checkpoint`` atomically: one file from rank 0, or under a sharded strategy a directory where every
    rank writes the shards of the entries named in ``layout_keys``. Every rank calls this."""
    strategy.save_checkpoint(checkpoint, path, layout_keys=layout_keys)  # the caller's path object, as Lightning


def read_state(io: CheckpointIO, path: str | os.PathLike, layout_keys: tuple[str, ...], argument: str = "path",
               required: tuple[str, ...] = ()) -> dict[str, Any]:
    """What ``save_state`` wrote, on the CPU, read as data (never code) through ``io`` (the strategy's
    ``checkpoint_io``). For a sharded (or DeepSpeed) directory the entries in ``layout_keys`` stay on disk as handles
    the strategy's ``load_*_state_dict`` read into the live layout. Errors name ``argument`` (the caller's parameter)
    and, when the state lacks one of the ``required`` keys, what was expected."""
    # local import: `from trainer import Trainer, Module` loads no strategy plugin (tests/trainer/test_imports.py)
    from plugins.strategies.deepspeed_checkpoint import attach_deepspeed_state, is_deepspeed_checkpoint
    from plugins.strategies.sharded_checkpoint import META_FILE, ShardedState, attach_sharded_state

    path = Path(path)
    deepspeed = is_deepspeed_checkpoint(path)  # the engine's files for module and optimizer, meta.pt for the rest
    sharded = path.is_dir() and not deepspeed
    if deepspeed:
        loaded = io.load(path / META_FILE)
    elif sharded:
        if not (path / META_FILE).is_file() or not (path / ".metadata").is_file():
            raise CheckpointNotFoundError(
                f"{argument}={str(path)!r} is a directory but not a sharded Relay checkpoint (it needs {META_FILE} and "
                ".metadata, written by a sharded strategy's save_checkpoint); pass a .ckpt file or such a directory."
            )
        ShardedState(path, None).metadata()  # the metadata is read (safely) before anything else
        loaded = io.load(path / META_FILE)
    elif path.is_file():
        loaded = io.load(path)
    else:
        raise CheckpointNotFoundError(f"Checkpoint not found: {argument}={str(path)!r} names no file or directory.")
    if not isinstance(loaded, Mapping) or not all(k in loaded for k in required):
        found = sorted(loaded) if isinstance(loaded, Mapping) else type(loaded).__name__
        if required:
            raise MisconfigurationError(
                f"{argument}={str(path)!r} is not a Relay checkpoint: expected keys {list(required)}, found {found}."
            )
        raise MisconfigurationError(f"{argument}={str(path)!r} holds a {found}, not a state dict.")
    checkpoint = dict(loaded)
    if sharded:
        attach_sharded_state(checkpoint, path, layout_keys)
    elif deepspeed:
        attach_deepspeed_state(checkpoint, path, layout_keys)
    return checkpoint


def module_state(strategy: Strategy, module: torch.nn.Module) -> dict[str, Any]:
    """``module``'s state in the strategy's layout (shards under FSDP), for ``save_state``."""
    return strategy.module_state_dict(module)


def load_module_state(strategy: Strategy, module: torch.nn.Module, state: Any, strict: bool = True) -> None:
    """A saved module state (a plain state dict, or ``read_state``'s sharded handle) into ``module``'s layout."""
    strategy.load_module_state_dict(module, state, strict=strict)


def load_optimizer_state(strategy: Strategy, optimizer: torch.optim.Optimizer, state: Any,
                         module: torch.nn.Module | None = None) -> None:
    """Optimizer state in any layout, matched to the parameters of ``module`` (default: the strategy's)."""
    previous = strategy.module
    if module is not None:
        strategy.module = module
    try:
        strategy.load_optimizer_state_dict(optimizer, state)
    finally:
        strategy.module = previous


def strategy_restores_optimizers(strategy: Strategy, checkpoint: dict[str, Any]) -> bool:
    """True when a Lightning strategy (a user's subclass) takes the optimizers' restore on itself, as Lightning's
    Trainer lets it: ``lightning_restore_optimizer`` False (nothing restored), or its own
    ``load_optimizer_state_dict(checkpoint)``, called here with the whole checkpoint. False: restore each optimizer
    with ``load_optimizer_state``."""
    if not getattr(strategy, "lightning_restore_optimizer", True):
        return True
    if _takes_whole_checkpoint(strategy):
        strategy.load_optimizer_state_dict(checkpoint)
        return True
    return False


def _takes_whole_checkpoint(strategy: Strategy) -> bool:
    """Whether the strategy's ``load_optimizer_state_dict`` is a Lightning strategy's, ``(checkpoint)``, defined
    outside Relay's plugins, rather than Relay's ``(optimizer, state)``."""
    method = getattr(type(strategy), "load_optimizer_state_dict", None)
    if method is None or getattr(method, "__module__", "").startswith("plugins."):
        return False
    try:
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) == 2  # self, checkpoint


def optimizer_state(strategy: Strategy, optimizer: torch.optim.Optimizer,
                    module: torch.nn.Module | None = None) -> dict[str, Any]:
    previous = strategy.module
    if module is not None:
        strategy.module = module
    try:
        return strategy.optimizer_state_dict(optimizer)
    finally:
        strategy.module = previous
