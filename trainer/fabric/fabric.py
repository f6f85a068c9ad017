"""``Fabric``: keep your own training loop; Relay's plugins handle devices, precision, processes and sharding.

The same strategy, accelerator, precision, launcher and checkpoint I/O objects as the Trainer, built by the
same resolver (``plugins.selection``) and called through the same layer (``trainer.distributed.launch``, ``trainer.distributed.strategy``,
``trainer.checkpointing.strategy_state``); this
class only keeps Lightning Fabric's API in front of them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from plugins.checkpoint_io import trusted_loads
from trainer.distributed import launch, strategy as calls
from trainer.fabric import checkpoint
from trainer.fabric.loaders import with_distributed_sampler
from trainer.fabric.wrappers import FabricDataLoader, FabricModule, FabricOptimizer, is_wrapped, unwrap
from trainer.distributed.ranks import set_rank_zero_only
from trainer.seed import seed_everything, seed_loader_workers
from trainer.utilities.rank_zero import rank_zero_deprecation, rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from plugins.accelerators.base import Accelerator
    from plugins.checkpoint_io import CheckpointIO
    from plugins.environments.base import ClusterEnvironment
    from plugins.precision.base import Precision
    from plugins.strategies.base import Strategy
    from trainer.loggers.base import BaseLogger

_T = TypeVar("_T")

# strategies whose loop a Fabric user cannot drive: the strategy name -> one line saying why and what to use
UNSUPPORTED = {
    "pipeline": "a pipeline schedule runs forward and backward together over micro-batches, which a loop calling "
                "model(x) and fabric.backward(loss) cannot drive; use Trainer(strategy='pipeline')",
}


def _do_nothing(*_: object) -> None:
    """``launch()``'s default function: only start the processes."""


def _using_cli() -> bool:
    """Whether the processes were started by Lightning's CLI (``fabric run``), which sets ``LT_CLI_USED``."""
    return bool(int(os.environ.get("LT_CLI_USED", "0") or 0))


def strategy_override(strategy: object, name: str) -> Callable[..., Any] | None:
    """``strategy.<name>`` where the strategy brings its own (Lightning's strategy API: a method set on the object, or
    defined by a class outside Relay's plugins, e.g. a user's subclass or a Lightning-named adapter); None where it
    is Relay's own, which Fabric drives through its plugin calls instead."""
    method = getattr(strategy, name, None)
    if method is None:
        return None
    if name in getattr(strategy, "__dict__", {}):
        return method
    for klass in type(strategy).__mro__:
        if name in klass.__dict__:
            return None if klass.__module__.startswith("plugins.") else method
    return None


def _as_list(value: object) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


class Fabric:
    """Lightning Fabric's API on Relay's plugins: ``Fabric(accelerator, strategy, devices, num_nodes, precision,
    plugins, callbacks, loggers)``, then ``launch()``, ``setup(...)``, ``backward(loss)`` in your loop."""

    def __init__(
        self,
        *,
        accelerator: str | Accelerator = "auto",
        strategy: str | Strategy = "auto",
        devices: list[int] | str | int = "auto",
        num_nodes: int = 1,
        precision: str | int | Precision | None = None,
        plugins: Precision | ClusterEnvironment | CheckpointIO | list[Precision | ClusterEnvironment | CheckpointIO]
        | None = None,
        callbacks: Any = None,
        loggers: BaseLogger | list[BaseLogger] | None = None,
    ) -> None:
        if type(self).run is not Fabric.run and _using_cli():
            raise TypeError("Overriding `Fabric.run()` and launching from the CLI is not allowed. Run the script "
                            "normally, or change your code to directly call `fabric = Fabric(...); fabric.setup(...)`"
                            " etc.")
        name = strategy if isinstance(strategy, str) else getattr(strategy, "name", "")
        if name in UNSUPPORTED:
            raise ValueError(f"Fabric(strategy={name!r}) is not supported: {UNSUPPORTED[name]}.")
        self._strategy = calls.resolve_strategy(accelerator, strategy, devices, num_nodes,
                                                "32-true" if precision is None else precision, plugins, "Fabric")
        self._callbacks = _as_list(callbacks)
        self._loggers = _as_list(loggers)
        self._launched = False
        self._models_setup = 0
        self._engines_built = 0  # under a joint-setup strategy (DeepSpeed): setup(model, optimizer) calls
        self._modules: list[torch.nn.Module] = []
        set_rank_zero_only(self._strategy.global_rank)
        if _using_cli():  # the processes exist already (Lightning's `fabric run`): join the group now, as Lightning
            launch.join_processes(self._strategy)
            self._launched = True

    # --- who am I ---------------------------------------------------------------------------------
    @property
    def accelerator(self) -> Accelerator | None:
        return self._strategy.accelerator

    @property
    def strategy(self) -> Strategy:
        return self._strategy

    @property
    def device(self) -> torch.device:
        return self._strategy.root_device

    @property
    def global_rank(self) -> int:
        return self._strategy.global_rank

    @property
    def local_rank(self) -> int:
        return self._strategy.local_rank

    @property
    def node_rank(self) -> int:
        return getattr(self._strategy, "node_rank", 0)

    @property
    def world_size(self) -> int:
        return self._strategy.world_size

    @property
    def is_global_zero(self) -> bool:
        return self._strategy.is_global_zero

    @property
    def loggers(self) -> list[BaseLogger]:
        return self._loggers

    @property
    def logger(self) -> BaseLogger:
        """The first logger given (the main one); an IndexError without loggers, as Lightning's."""
        return self._loggers[0]

    # --- processes ----------------------------------------------------------------------------------
    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Lightning's older entry point: a subclass may override it with its training code."""

    def launch(self, function: Callable[..., Any] = _do_nothing, *args: Any, **kwargs: Any) -> Any:
        """Start the processes (when this one must), join the process group, then run ``function(self, ...)``."""
        if _using_cli():
            raise RuntimeError("This script was launched through the CLI, and processes have already been created. "
                               "Calling  `.launch()` again is not allowed.")
        if function is _do_nothing:
            function = None
        elif not callable(function):
            raise TypeError(f"`Fabric.launch(...)` needs to be a callable, but got {function}. HINT: do "
                            "`.launch(your_fn)` instead of `.launch(your_fn())`")
        if function is not None and not inspect.signature(function).parameters:
            raise TypeError(f"`Fabric.launch(function={function})` needs to take at least one argument. The launcher "
                            "will pass in the `Fabric` object so you can use it inside the function.")
        launcher = getattr(self._strategy, "launcher", None)
        if launcher is not None and hasattr(launcher, "launch_function") and function is None:
            raise TypeError(f"To spawn processes with the `{type(self._strategy).__name__}` strategy, `.launch()` "
                            "needs to be called with a function that contains the code to launch in processes.")
        entry = functools.partial(_in_worker, function, kwargs)  # picklable for a spawning launcher
        started, result = launch.start_processes(self._strategy, entry, args, self)
        if started:
            return result
        launch.join_processes(self._strategy)
        self._launched = True
        return function(self, *args, **kwargs) if function is not None else None

    def _check_launched(self) -> None:
        if not self._launched and self.world_size > 1:
            raise RuntimeError("To use Fabric with more than one device, you must call `.launch()` or use the CLI: "
                               "`fabric run --help`.")
        if not self._launched:
            launch.join_processes(self._strategy)
            self._launched = True

    # --- setting things up ----------------------------------------------------------------------
    def setup(self, module: torch.nn.Module, *optimizers: torch.optim.Optimizer, move_to_device: bool = True,
              _reapply_compile: bool = True) -> Any:
        """The module (and optimizers) ready for this strategy; optimizers made before a sharding strategy
        replaced the parameters are pointed at the new ones, and an engine (DeepSpeed) is built around both before
        the module's forward is bound to it."""
        self._check_setup(module, optimizers)
        self._before_setup_module(module, engine=bool(optimizers))
        names = {id(p): n for n, p in module.named_parameters()}
        module, holder = calls.setup_module(self._strategy, module)
        live = dict(module.named_parameters())
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                group["params"] = [live.get(names.get(id(p), ""), p) for p in group["params"]]
        prepared = calls.setup_optimizers(self._strategy, list(optimizers)) if optimizers else []
        wrapped = self._wrap_module(holder, module)
        fabric_optimizers = [FabricOptimizer(o, self._strategy) for o in prepared]
        _attach(module, self, fabric_optimizers)
        if not optimizers:
            return wrapped
        return (wrapped, *fabric_optimizers)

    def _check_setup(self, module: torch.nn.Module, optimizers: Iterable[torch.optim.Optimizer]) -> None:
        if is_wrapped(module):
            raise ValueError("A model should be passed only once to the `setup` method.")
        if any(is_wrapped(o) for o in optimizers):
            raise ValueError("An optimizer should be passed only once to the `setup` method.")

    def _before_setup_module(self, module: torch.nn.Module, engine: bool = False) -> None:
        """Joined the group, a tensor-parallel plan applied; with ``engine``, a joint-setup strategy builds its
        engine around module and optimizer, and Relay's Fabric drives one such engine."""
        self._check_launched()
        _check_tensor_parallel_plan(self._strategy, module)
        if not (engine and self._strategy.joint_setup):
            return
        if self._engines_built:
            name = type(self._strategy).__name__
            raise ValueError(
                f"The `{name}` builds one engine around a model and its optimizer, and this Fabric already set one up "
                "with `.setup(model, optimizer)`; Relay drives one engine per Fabric: put the models in one "
                "nn.Module and set that up with one optimizer (parameter groups for different settings)."
            )
        self._engines_built += 1

    def _wrap_module(self, holder: torch.nn.Module, module: torch.nn.Module) -> FabricModule:
        """The set-up module as the loop calls it; built once the strategy (and its engine) is ready."""
        self._modules.append(module)
        self._models_setup += 1
        return FabricModule(holder, module, self._strategy)

    def setup_module(self, module: torch.nn.Module, move_to_device: bool = True,
                     _reapply_compile: bool = True) -> FabricModule:
        if is_wrapped(module):
            raise ValueError("A model should be passed only once to the `setup_module` method.")
        self._before_setup_module(module)
        module, holder = calls.setup_module(self._strategy, module)
        _attach(module, self, [])
        return self._wrap_module(holder, module)

    def setup_optimizers(self, *optimizers: torch.optim.Optimizer) -> FabricOptimizer | tuple[FabricOptimizer, ...]:
        if self._strategy.joint_setup:  # Lightning Fabric's words
            raise RuntimeError(f"The `{type(self._strategy).__name__}` requires the model and optimizer(s) to be set "
                               "up jointly through `.setup(model, optimizer, ...)`.")
        if not optimizers:
            raise ValueError("`setup_optimizers` requires at least one optimizer as input.")
        if any(is_wrapped(o) for o in optimizers):
            raise ValueError("An optimizer should be passed only once to the `setup_optimizers` method.")
        self._check_launched()
        prepared = calls.setup_optimizers(self._strategy, list(optimizers))
        wrapped = [FabricOptimizer(o, self._strategy) for o in prepared]
        return wrapped[0] if len(wrapped) == 1 else tuple(wrapped)

    def setup_dataloaders(self, *dataloaders: DataLoader, use_distributed_sampler: bool = True,
                          move_to_device: bool = True) -> FabricDataLoader | list[FabricDataLoader]:
        if not dataloaders:
            raise ValueError("`setup_dataloaders` requires at least one dataloader as input.")
        if any(is_wrapped(d) for d in dataloaders):
            raise ValueError("A dataloader should be passed only once to the `setup_dataloaders` method.")
        from torch.utils.data import DataLoader

        if any(not isinstance(d, DataLoader) for d in dataloaders):
            raise TypeError("Only PyTorch DataLoader are currently supported in `setup_dataloaders`.")
        self._check_launched()
        loaders = [with_distributed_sampler(d, self._strategy) if use_distributed_sampler else d for d in dataloaders]
        for loader in loaders:  # seeded workers after seed_everything(workers=True), as the Trainer's loaders
            seed_loader_workers(loader, self.global_rank)
        out = [FabricDataLoader(d, self._strategy if move_to_device else None) for d in loaders]
        return out[0] if len(out) == 1 else out

    # --- in the loop --------------------------------------------------------------------------------
    def backward(self, tensor: torch.Tensor, *args: Any, model: FabricModule | None = None, **kwargs: Any) -> None:
        if self._models_setup == 0:
            raise RuntimeError("No models were set up for backward. Did you forget to call `fabric.setup()`?")
        calls.backward(self._strategy, tensor, *args, **kwargs)

    def clip_gradients(self, module: torch.nn.Module | FabricModule, optimizer: Any, clip_val: float | None = None,
                       max_norm: float | None = None, norm_type: float = 2.0,
                       error_if_nonfinite: bool = True) -> torch.Tensor | None:
        """Clip by value (``clip_val``) or by the global norm (``max_norm``; the norm before clipping comes back)."""
        if clip_val is not None and max_norm is not None:
            raise ValueError("Only one of `clip_val` or `max_norm` can be set as this specifies the underlying "
                             "clipping algorithm!")
        if clip_val is None and max_norm is None:
            raise ValueError("You have to specify either `clip_val` or `max_norm` to do gradient clipping!")
        if self._strategy.loop_clipping_refused:  # an engine that clips inside its own step (DeepSpeed)
            raise NotImplementedError(self._strategy.loop_clipping_refused)
        module, optimizer = unwrap(module), unwrap(optimizer)
        if clip_val is not None:
            self._strategy.clip_gradients_value(module, optimizer, clip_val=clip_val)
            return None
        return self._strategy.clip_gradients_norm(module, optimizer, max_norm=max_norm, norm_type=norm_type,
                                                  error_if_nonfinite=error_if_nonfinite)

    def autocast(self) -> contextlib.AbstractContextManager:
        """The precision's autocast, for code that runs outside the set-up module's forward."""
        return self._strategy.precision.forward_context()

    def no_backward_sync(self, module: FabricModule, enabled: bool = True) -> contextlib.AbstractContextManager:
        """Skip the gradient all-reduce (DDP's ``no_sync``, FSDP's) on gradient-accumulation steps; a no-op with
        Lightning's warning where an engine accumulates from its own config (DeepSpeed)."""
        if not isinstance(module, FabricModule):
            raise TypeError("You need to set up the model first before you can call `fabric.no_backward_sync()`: "
                            "`model = fabric.setup(model, ...)`")
        if not self._strategy.loop_backward_sync:
            rank_zero_warn(f"The `{type(self._strategy).__name__}` does not support skipping the gradient "
                           "synchronization. Remove `.no_backward_sync()` from your code or choose a different "
                           "strategy.", category=PossibleUserWarning)
            return contextlib.nullcontext()
        return self._strategy.no_backward_sync(enabled)

    def init_module(self, empty_init: bool | None = None) -> contextlib.AbstractContextManager:
        """Build the model on the device in the precision's dtype (FSDP: on the CPU, or meta with ``empty_init``)."""
        return self._strategy.tensor_init_context(empty_init=empty_init)

    @contextlib.contextmanager
    def sharded_model(self) -> Generator[None, None, None]:
        """Lightning's deprecated context for building a model to shard; Relay's strategies shard in ``setup``, so
        the model is built as it is (``init_module`` places it)."""
        rank_zero_deprecation("`Fabric.sharded_model()` is deprecated in favor of `Fabric.init_module()`.")
        yield

    def init_tensor(self) -> contextlib.AbstractContextManager:
        return self._strategy.tensor_init_context()

    def to_device(self, obj: Any) -> Any:
        if isinstance(obj, torch.nn.Module):
            return obj.to(self.device)
        return calls.move_to_device(self._strategy, obj)

    # --- collectives --------------------------------------------------------------------------------
    def all_gather(self, data: torch.Tensor | dict | list | tuple, group: Any | None = None, sync_grads: bool = False,
                   ) -> torch.Tensor | dict | list | tuple:
        return calls.gather(self._strategy, data, self.device, group=group, sync_grads=sync_grads)

    def all_reduce(self, data: torch.Tensor | dict | list | tuple, group: Any | None = None, reduce_op: str = "mean",
                   ) -> torch.Tensor | dict | list | tuple:
        from lightning_utilities.core.apply_func import apply_to_collection

        data = calls.as_tensors(data, self.device)
        return apply_to_collection(data, torch.Tensor, self._strategy.all_reduce, op=str(reduce_op).lower())

    def broadcast(self, obj: _T, src: int = 0) -> _T:
        return self._strategy.broadcast(obj, src=src)

    def barrier(self, name: str | None = None) -> None:
        self._strategy.barrier(name)

    @contextlib.contextmanager
    def rank_zero_first(self, local: bool = False) -> Generator[None, None, None]:
        """Rank 0 (of the node, with ``local``) runs the block first, the others after it finished."""
        rank = self.local_rank if local else self.global_rank
        if rank > 0:
            self.barrier("rank_zero_first")
        yield
        if rank == 0:
            self.barrier("rank_zero_first")

    def print(self, *args: Any, **kwargs: Any) -> None:
        if self.local_rank == 0:
            print(*args, **kwargs)

    # --- callbacks and loggers ----------------------------------------------------------------------
    def call(self, hook_name: str, *args: Any, **kwargs: Any) -> None:
        """Call ``hook_name`` on every callback that has it (keyword arguments it does not take are left out)."""
        for callback in self._callbacks:
            method = getattr(callback, hook_name, None)
            if method is None:
                continue
            if not callable(method):
                rank_zero_warn(f"Skipping the callback `{type(callback).__name__}.{hook_name}` because it is not "
                               "callable.")
                continue
            given = kwargs
            try:
                params = inspect.signature(method).parameters
            except (ValueError, TypeError):  # a signature that cannot be read: every keyword goes (as Lightning)
                params = None
            if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                given = {k: v for k, v in kwargs.items() if k in params}
            method(*args, **given)

    def log(self, name: str, value: Any, step: int | None = None) -> None:
        self.log_dict({name: value}, step=step)

    def log_dict(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        from lightning_utilities.core.apply_func import apply_to_collection

        metrics = apply_to_collection(dict(metrics), torch.Tensor, _scalar)
        for logger in self._loggers:
            logger.log_metrics(metrics=metrics, step=step)

    # --- checkpoints --------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, state: Mapping[str, Any],
             filter: Mapping[str, Callable[[str, Any], bool]] | None = None) -> None:
        """Save modules, optimizers and plain objects (under FSDP: each rank its shards, into a directory)."""
        saver = strategy_override(self._strategy, "save_checkpoint")
        if saver is None:
            checkpoint.save(self._strategy, path, state, filter)
        else:  # the strategy's own (Lightning's strategy API)
            saver(path=path, state={k: unwrap(v) for k, v in state.items()}, filter=filter)
        self.barrier("fabric_save")

    def load(self, path: str | os.PathLike, state: dict[str, Any] | None = None, strict: bool = True,
             *, weights_only: bool | None = None) -> dict[str, Any]:
        """Restore ``state`` in place from ``path``; what the checkpoint holds beyond ``state`` comes back.

        The file is read as data (tensors, containers and the types checkpoints hold); ``weights_only=False``
        unpickles it in full, for a file you trust that holds your own objects (torch's and Lightning's opt-in)."""
        loader = strategy_override(self._strategy, "load_checkpoint")
        if loader is None:
            with trusted_loads(weights_only):
                remainder = checkpoint.load(self._strategy, path, state, strict)
        else:  # the strategy's own (Lightning's strategy API): it restores ``state`` and returns the rest
            unwrapped = None if state is None else {k: unwrap(v) for k, v in state.items()}
            remainder = loader(path=path, state=unwrapped, strict=strict, weights_only=weights_only)
            for key, value in (unwrapped or {}).items():
                if not is_wrapped(state[key]):  # plain values restored in place come back into the caller's dict
                    state[key] = value
        self.barrier("fabric_load")
        return remainder

    def load_raw(self, path: str | os.PathLike, obj: torch.nn.Module | torch.optim.Optimizer, strict: bool = True,
                 weights_only: bool | None = None) -> None:
        """Load a plain ``state_dict`` file (not one ``save`` wrote) into ``obj``; ``weights_only`` as in ``load``."""
        loader = strategy_override(self._strategy, "load_checkpoint")
        if loader is not None:  # the strategy's own (Lightning's strategy API)
            loader(path=path, state=unwrap(obj), strict=strict, weights_only=weights_only)
            return
        with trusted_loads(weights_only):
            checkpoint.load_raw(self._strategy, path, obj, strict)

    # --- seeding ------------------------------------------------------------------------------------
    @staticmethod
    def seed_everything(seed: int | None = None, workers: bool | None = None, verbose: bool = True) -> int:
        seed = seed_everything(seed, workers=True if workers is None else workers, verbose=verbose)
        os.environ["PL_GLOBAL_SEED"] = str(seed)  # what a distributed sampler's seed reads, as in Lightning
        return seed


def _check_tensor_parallel_plan(strategy: Strategy, module: torch.nn.Module) -> None:
    """Tensor parallelism needs a plan; the Trainer's comes from ``Module.configure_model``, a loop applies its own."""
    tp = getattr(strategy, "tensor_parallel_size", 1)
    if tp <= 1 or getattr(strategy, "parallelize_fn", None) is not None:  # Lightning's: applied in setup_module
        return
    from torch.distributed.tensor import DTensor

    if not any(isinstance(p, DTensor) for p in module.parameters()):
        raise ValueError(
            f"Fabric(strategy='model_parallel') with tensor_parallel_size={tp}: {type(module).__name__} has no "
            "tensor-parallel plan applied. Apply it before setup_module (torch.distributed.tensor.parallel."
            "parallelize_module(model, fabric.strategy.device_mesh['tp'], plan)), or use strategy='fsdp'."
        )


def _in_worker(function: Callable[..., object] | None, kwargs: Mapping[str, object], fabric: Fabric, *args: object,
               ) -> object:
    """What a spawned worker runs once it joined the group: the user's function, with this Fabric launched."""
    fabric._launched = True
    return function(fabric, *args, **kwargs) if function is not None else None


def _scalar(tensor: torch.Tensor) -> int | float | bool:
    if tensor.numel() != 1:
        raise ValueError(f"`Fabric.log` got a tensor of shape {tuple(tensor.shape)}; it cannot be converted to a "
                         "scalar. Log one number (e.g. `tensor.mean()`) or log each element under its own name.")
    return tensor.item()


def _attach(module: torch.nn.Module, fabric: Fabric, optimizers: list[Any]) -> None:
    """A Lightning-style module (``trainer.Module``) set up by Fabric answers through it from now on: ``self.log``,
    ``self.trainer``, ``self.optimizers()``, ``manual_backward`` (``trainer/model/fabric_use.py``)."""
    if "_fabric" in getattr(module, "__dict__", {}):
        module._fabric = fabric
        module._fabric_optimizers = optimizers
