"""The Strategy interface: every way of spreading work over processes fits behind it.

How each strategy maps onto it:

- single device: ``setup_module`` moves the module to the device; collectives are identities.
- DDP: ``setup_module`` wraps in ``DistributedDataParallel``; ``no_backward_sync`` is DDP's ``no_sync``
  on accumulation steps; ``distributed_sampler_kwargs`` shards data; collectives use the process group.
- FSDP (+ tensor parallel): ``setup_module`` applies ``fully_shard``/``parallelize_module`` over a
  ``DeviceMesh``; ``module_state_dict``/``load_module_state_dict`` and the optimizer counterparts
  speak the sharded layout; ``save_checkpoint`` writes a directory of shards instead of one file;
  ``clip_gradients_by_norm`` computes the norm over shards. Every strategy loads both kinds of checkpoint.
- pipeline parallel: ``forward_backward`` runs the schedule (forward and backward over micro-batches
  through the stages) instead of ``training_step`` + ``backward``, so the Trainer still sees "a step
  that returns a loss".
- Horovod: ``setup_optimizers`` wraps in ``hvd.DistributedOptimizer``; collectives are ``hvd.*``.

The Trainer never branches on a strategy's name; it only calls these methods.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from plugins import strategies as _strategies  # the package: loading and Fabric's calls load their modules on use
from plugins.accelerators.base import Accelerator
from plugins.apply_func import optimizer_state_to
from plugins.checkpoint_io import CheckpointIO, checkpoint_io_of
from plugins.strategies.lightning_members import LightningStrategyMembers
from plugins.precision.base import Precision


def constructor_arguments(cls: type) -> list[str]:
    """Every keyword ``cls(...)`` accepts: its ``__init__``'s and, through ``**kwargs``, its bases' (sorted)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(getattr(init, "__wrapped__", init)).parameters.values()
        names.update(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self")
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return sorted(names)


def unknown_argument_error(cls: type, unknown: list[str], kwargs: dict[str, Any]) -> TypeError:
    """One line: the bad keyword, what is valid, and a config override that works."""
    import difflib

    valid = constructor_arguments(cls)
    name = unknown[0]
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    key, value = _example_override(cls, close[0] if close else None)
    return TypeError(
        f"{cls.__name__}({name}={kwargs[name]!r}): unknown argument {name!r}.{hint} Valid: {', '.join(valid)}; "
        f"from a config, strategy.<argument>=<value>, e.g. strategy.{key}={value}"
    )


def _example_override(cls: type, name: str | None) -> tuple[str, str]:
    """An override that works: ``name`` (or the class's own first argument) with its default, as YAML writes it."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(getattr(init, "__wrapped__", init)).parameters.values():
            if p.name in ("self", "accelerator", "precision") or p.kind not in (p.POSITIONAL_OR_KEYWORD,
                                                                                 p.KEYWORD_ONLY):
                continue
            if name is None or p.name == name:
                default = p.default
                if default is inspect.Parameter.empty or not isinstance(default, (bool, int, float, str, type(None))):
                    return p.name, "..."
                text = {True: "true", False: "false", None: "null"}.get(default, default)  # type: ignore[call-overload]
                return p.name, str(text)
    return "<argument>", "<value>"


def _check_keywords(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a strategy's ``__init__`` so an unknown keyword is a clear error naming the valid ones, instead of
    ``ParallelStrategy.__init__() got an unexpected keyword argument`` from deep in the chain of ``super()``.
    Only for Relay's own classes: a third-party strategy may take ``**kwargs`` for itself, which the names
    collected up the chain cannot know."""

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        # the user's call only (the class's own ``__init__``): the ``super()`` calls below it are Relay's forwarding
        outermost = next(c.__dict__["__init__"] for c in cls.__mro__ if "__init__" in c.__dict__)
        if cls.__module__.startswith("plugins.") and outermost is checked:
            unknown = [k for k in kwargs if k not in _valid_arguments(cls)]
            if unknown:
                raise unknown_argument_error(cls, unknown, kwargs)
        init(self, *args, **kwargs)

    return checked


@functools.lru_cache(maxsize=None)
def _valid_arguments(cls: type) -> frozenset[str]:
    return frozenset(constructor_arguments(cls))



def under_forward_context(precision: Precision, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run inside the precision's forward context (autocast); ``fn`` itself where that context does
    nothing (full precision), so the step path adds no layer."""
    if type(precision).forward_context is Precision.forward_context:
        return fn

    def run(*args: Any, **kwargs: Any) -> Any:
        with precision.forward_context():
            return fn(*args, **kwargs)

    return run

def _params_with_grads(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]


class Strategy(LightningStrategyMembers):
    """Single-process defaults; distributed strategies override what differs. Lightning's own members
    (``lightning_module``, ``reduce``, ``precision_plugin``...) come from ``lightning_members.py``."""

    name = ""
    # What a user's own loop (Fabric) may ask of this strategy; an engine that wraps module and optimizer together
    # (DeepSpeed) answers differently from the strategies that leave the loop in charge:
    # the module and its optimizer are set up in one call (the engine is built around both and saves both itself)
    joint_setup = False
    # the loop may skip the gradient synchronisation on accumulation steps (``no_backward_sync``)
    loop_backward_sync = True
    # why the loop may not clip gradients itself (the engine clips inside its step), or None where it may
    loop_clipping_refused: str | None = None
    # why a copy of the module's and the torch optimizer's state does not hold all the training state (an engine
    # keeping its own master weights), or None where it does: spike recovery's rollback reads it
    state_outside_module: str | None = None
    # activation checkpointing / compile of the blocks (plugins.transforms), set by configure_model_transforms
    model_transforms: Any = None
    # Lightning's flag: the checkpoint is restored after the module is set up (a strategy that needs the wrapped
    # module to load into); Relay's strategies load into any layout, at the same point
    restore_checkpoint_after_setup = False
    # the module stays on its devices after a Trainer call (sharded, or held by an engine); otherwise it goes back to
    # the CPU when the call ends, as Lightning's strategies do
    module_stays_on_device = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _check_keywords(cls.__dict__["__init__"])  # type: ignore[method-assign]

    def __init__(
        self, accelerator: Accelerator | None = None, precision: Precision | None = None, checkpoint_io: Any = None,
        precision_plugin: Precision | None = None,
    ) -> None:
        """``checkpoint_io``: this strategy's checkpoint I/O instead of the default; ``precision_plugin``: Lightning's
        name for ``precision`` on the Trainer's strategies."""
        precision = precision if precision is not None else precision_plugin
        self.accelerator = accelerator
        self.precision = precision or Precision()
        self._precision_given = precision is not None
        self.environment: Any = None
        self.device_ids: list[int] = [0]
        self.num_nodes = 1
        self.module: torch.nn.Module | None = None
        self.lightning_module: torch.nn.Module | None = None  # what the Trainer runs (``trainer.lightning_module``)
        self.optimizers: list[torch.optim.Optimizer] = []  # a fit's (``trainer.optimizers``)
        self.module_on_cpu = False  # moved back to the CPU when the last Trainer call ended (``on_stage_end``)
        self.lr_scheduler_configs: list[Any] = []
        # backward passes per optimizer step (the Trainer's accumulate_grad_batches): Horovod's optimizer needs it
        self.accumulate_grad_batches = 1
        # every byte of a checkpoint on disk goes through it; set in the instance (``checkpoint_io_of``), so a class
        # may make the public attribute refuse, as Lightning's FSDP strategy for Fabric does
        vars(self)["checkpoint_io"] = CheckpointIO() if checkpoint_io is None else checkpoint_io

    @property
    def cluster_environment(self) -> Any:
        """Lightning's name for the environment that says who this process is (``environment``)."""
        return self.environment

    @cluster_environment.setter
    def cluster_environment(self, environment: Any) -> None:
        self.environment = environment

    def connect(
        self, accelerator: Accelerator, precision: Precision, environment: Any = None,
        device_ids: list[int] | None = None, num_nodes: int = 1,
    ) -> None:
        """Placement chosen by the resolver; what the user passed to the constructor wins."""
        self.accelerator = self.accelerator or accelerator
        if not self._precision_given:
            self.precision = precision
        self.environment = environment
        self.device_ids = list(device_ids) if device_ids else [0]
        self.num_nodes = num_nodes

    # --- who am I -------------------------------------------------------------------------------
    @property
    def root_device(self) -> torch.device:
        raise NotImplementedError

    @property
    def world_size(self) -> int:
        return 1

    @property
    def global_rank(self) -> int:
        return 0

    @property
    def local_rank(self) -> int:
        return 0

    @property
    def is_global_zero(self) -> bool:
        return self.global_rank == 0

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int]:
        """How the Trainer shards data: ``num_replicas`` and ``rank``."""
        return {"num_replicas": self.world_size, "rank": self.global_rank}

    def tensor_init_context(self, empty_init: bool | None = None) -> contextlib.AbstractContextManager:
        """Modules built inside (``Trainer.init_module``) are made on the root device in the precision's dtype;
        ``empty_init=True`` skips their initialisation (weights about to be loaded). None: initialised."""
        return _strategies.init_context.tensor_init_context(self.root_device, self.precision.tensor_init_context(),
                                                            empty_init)

    # --- lifecycle ------------------------------------------------------------------------------
    def setup_environment(self) -> None:
        """Create process groups, select the device. Called once before anything else."""
        self.module_on_cpu = False  # a new call: the module is the strategy's device's again (Module.device)
        if self.accelerator is not None:
            self.accelerator.setup_device(self.root_device)

    def configure_optimization(
        self, accumulate_grad_batches: int, gradient_clip_val: float | None, gradient_clip_algorithm: str | None,
    ) -> None:
        """The Trainer's accumulation and clipping settings, before ``setup_module``.

        Nothing to do for strategies that let the loop apply them; an engine that accumulates and clips
        itself (DeepSpeed) takes them into its own configuration instead, so they are applied once.
        """

    def check_module(self, module: torch.nn.Module) -> None:
        """Whether ``module`` fits this strategy's layout, asked in the launching process before any worker starts
        (the module may still lack what ``configure_model`` builds): raise a ``ValueError`` for what cannot work,
        so the user reads one error instead of one traceback per rank."""

    def configure_model_transforms(self, transforms: Any) -> None:
        """Activation checkpointing and ``torch.compile`` of the model's blocks (``plugins.transforms``), before
        ``setup_module``, which applies them after tensor parallel and before its data-parallel wrapper."""
        self.model_transforms = transforms

    def apply_model_transforms(self, module: torch.nn.Module) -> None:
        if self.model_transforms:
            from plugins.transforms.blocks import apply_model_transforms  # local import: only runs that ask load it

            apply_model_transforms(module, self.model_transforms)

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        """Move/wrap the module; returns what the Trainer calls for forward (may be a wrapper)."""
        module = self.precision.convert_module(module).to(self.root_device)
        self.apply_model_transforms(module)
        self.module = module
        return module

    def setup_optimizers(self, optimizers: list[torch.optim.Optimizer]) -> list[torch.optim.Optimizer]:
        return optimizers

    def connect_loop_state(
        self, state_dict: Callable[[], dict[str, Any]], load_state_dict: Callable[[dict[str, Any]], None],
    ) -> None:
        """The loop's counters (``global_step``), for a strategy that hands training state to a rejoining replica
        outside checkpoints (torchft's healing); called once per fit after ``setup_optimizers``."""

    def begin_training(self) -> None:
        """Called once start-up (set-up, loading a checkpoint) is done and the loop begins."""

    def on_stage_end(self) -> None:
        """A Trainer call ended, successfully or not (Lightning's ``Strategy.teardown``, which its Trainer calls after
        each call): the module and its optimizers' state go back to the CPU, so the module a user holds after ``fit``
        computes on CPU tensors, and the accelerator releases its cached memory. Processes and groups stay for the
        next call, which moves the module again; ``teardown`` is the final release."""
        module = self.lightning_module
        if not self.module_stays_on_device and module is not None and not any(
                p.is_meta for p in module.parameters()):  # a module never materialized has nothing to move
            for optimizer in self.optimizers:
                optimizer_state_to(optimizer, "cpu")
            module.cpu()
            self.module_on_cpu = True
        if self.accelerator is not None:
            self.accelerator.teardown()

    def teardown(self) -> None:
        if self.accelerator is not None:
            self.accelerator.teardown()

    # --- one step -------------------------------------------------------------------------------
    def batch_to_device(self, batch: Any) -> Any:
        if type(self.precision).convert_input is not Precision.convert_input:
            batch = self.precision.convert_input(batch)
        device = self.root_device
        if isinstance(batch, torch.Tensor):
            return batch.to(device, non_blocking=True)
        if type(batch) in (list, tuple):  # the common case, without apply_to_collection's recursion
            moved = []
            for item in batch:
                if not isinstance(item, torch.Tensor):
                    break
                moved.append(item.to(device, non_blocking=True))
            else:
                return moved if type(batch) is list else tuple(moved)
        from lightning_utilities.core.apply_func import apply_to_collection

        return apply_to_collection(batch, torch.Tensor, lambda t: t.to(device, non_blocking=True))

    def step_function(self, module: torch.nn.Module, name: str) -> Callable[..., Any]:
        """The callable that runs ``module.<name>`` (e.g. ``training_step``) the way this strategy needs.

        Looked up once per loop, so a strategy may wrap (DDP's forward, autocast) without per-step lookups;
        full precision gets the bare bound method.
        """
        return under_forward_context(self.precision, getattr(module, name))

    def forward_backward(
        self, step_fn: Callable[[Any, int], Any], batch: Any, batch_idx: int, backward: Any
    ) -> torch.Tensor | None:
        """One training step's forward and backward; the optimizer closure calls this.

        Contract (what an override must keep):

        - ``step_fn(batch, batch_idx)`` is the Module's ``training_step`` as ``step_function`` built it;
          it returns a loss tensor, a dict with ``"loss"``, or None (skip the batch).
        - ``backward`` is the loop's callback (``trainer.loops.training_step.BackwardStep``).
          ``backward(output)`` zeroes gradients when this batch opens an accumulation window, divides
          the loss by ``backward.accumulate``, runs ``on_before_backward``, ``self.backward`` (or the
          Module's ``backward``) and ``on_after_backward``, records ``output`` for logging and returns
          the scaled loss (None when skipped).
        - An override that computes gradients itself (a pipeline schedule, an engine's ``backward``)
          calls ``backward.zero_grad()`` *before* producing gradients (idempotent; a no-op inside an
          accumulation window), scales its loss by ``1 / backward.accumulate``, and finishes with
          ``return backward.finished(output)`` where ``output`` is the loss or a dict with ``"loss"``
          (the unscaled loss of the whole batch, the same on every rank).
        - Return the scaled loss (or None): the optimizer closure returns it and clipping runs only
          when it is not None. The loop already holds ``no_backward_sync`` on accumulation steps and
          steps the optimizer afterwards; do neither here.
        """
        return backward(step_fn(batch, batch_idx))

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """``args``/``kwargs`` (e.g. ``retain_graph=True``) reach ``Tensor.backward``."""
        self.precision.backward(loss, *args, **kwargs)

    def evaluation_context(self) -> contextlib.AbstractContextManager:
        """Around validation, test and prediction loops: no autograd graph."""
        return torch.inference_mode()

    def no_backward_sync(self, enabled: bool) -> contextlib.AbstractContextManager:
        """Skip gradient synchronisation for accumulation steps (DDP's ``no_sync``)."""
        return contextlib.nullcontext()

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any], **kwargs: Any) -> Any:
        """``kwargs`` (only when the user's ``step`` call gave some) reach the optimizer's ``step``."""
        return self.precision.optimizer_step(optimizer, closure, **kwargs)

    def clip_gradients(
        self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, value: float, algorithm: str
    ) -> None:
        self.precision.unscale_gradients(optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if algorithm == "norm":
            self.clip_gradients_by_norm(params, value)
        else:
            torch.nn.utils.clip_grad_value_(params, value)

    def clip_gradients_norm(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float,
                            norm_type: float = 2.0, error_if_nonfinite: bool = True) -> torch.Tensor:
        """A user's loop clipping by the global norm (Fabric's ``clip_gradients(max_norm=...)``): gradients unscaled,
        then clipped; the norm before clipping comes back (over every shard for a sharded strategy)."""
        self.precision.unscale_gradients(optimizer)
        params = _params_with_grads(optimizer)
        if norm_type != 2.0:
            return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type,
                                                  error_if_nonfinite=error_if_nonfinite)
        norm = self.clip_gradients_by_norm(params, float(max_norm))
        if error_if_nonfinite and norm is not None and not torch.isfinite(norm).all():
            raise RuntimeError(f"The total norm of gradients is {float(norm)}, non-finite, so it cannot be clipped. "
                               "Pass error_if_nonfinite=False to clip anyway.")
        return norm

    def clip_gradients_value(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer,
                             clip_val: float) -> None:
        """A user's loop clipping each gradient element to ``[-clip_val, clip_val]`` (Fabric's
        ``clip_gradients(clip_val=...)``), after unscaling."""
        self.precision.unscale_gradients(optimizer)
        torch.nn.utils.clip_grad_value_(_params_with_grads(optimizer), clip_val)

    def clip_gradients_by_norm(self, params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
        """Scale gradients so their global norm is at most ``max_norm`` (sharded strategies sum over shards);
        the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    # --- collectives (identities for one process) -----------------------------------------------
    def all_reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        return tensor

    def all_gather(self, tensor: torch.Tensor, group: Any = None, sync_grads: bool = False) -> torch.Tensor:
        """Every rank's ``tensor`` stacked along a new first dimension; with one process the tensor as it is (no
        dimension added, Lightning's rule). ``group``: a process group (None: all ranks); ``sync_grads``: gradients
        flow back through the gather."""
        return tensor

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order."""
        return [obj]

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return obj

    def barrier(self, name: str | None = None) -> None: ...

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        """Agree on a decision across ranks: ``all`` (every rank says yes) or any."""
        return decision

    def start_vote(self, flags: list[bool]) -> Callable[[], list[bool]]:
        """Start agreeing on ``flags`` (true where any rank says true); call the result to wait for it.

        Lets the loop agree on "stop" while the next batch runs instead of waiting every step.
        """
        return lambda: list(flags)

    # --- state layout ---------------------------------------------------------------------------
    # A checkpoint is a full file (rank 0 writes one copy) or a sharded directory (every rank writes its
    # shards); ``load_*`` accept either kind, so a run resumes from what any strategy wrote.
    def module_state_dict(self, module: torch.nn.Module) -> dict[str, Any]:
        return module.state_dict()

    def load_module_state_dict(self, module: torch.nn.Module, state: Any, strict: bool = True) -> None:
        sharded = _strategies.sharded_checkpoint
        if isinstance(state, sharded.ShardedState):
            sharded.load_module_state(state, module, strict)
        else:
            module.load_state_dict(state, strict=strict)

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return optimizer.state_dict()

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer, state: Any) -> None:
        sharded = _strategies.sharded_checkpoint
        if isinstance(state, sharded.ShardedState):
            sharded.load_optimizer_state(state, optimizer, self._state_module())
        else:
            by_index = _strategies.state_layout.optimizer_state_by_index(state, optimizer, self._state_module())
            optimizer.load_state_dict(by_index)

    def load_checkpoint(self, path: Any, state: Any = None, strict: bool = True,
                        weights_only: bool | None = None) -> dict[str, Any]:
        """Lightning Fabric's strategy call: ``state`` restored in place from ``path``, the rest returned."""
        return _strategies.fabric_api.load_checkpoint(self, path, state, strict, weights_only)

    def module_init_context(self, empty_init: bool | None = None) -> contextlib.AbstractContextManager:
        """Lightning Fabric's name for ``tensor_init_context``."""
        return self.tensor_init_context(empty_init=empty_init)

    def _state_module(self) -> torch.nn.Module:
        if self.module is None:
            raise RuntimeError(f"{type(self).__name__}: setup_module must run before optimizer state is loaded.")
        return self.module

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | None = None, layout_keys: tuple[str, ...] = (),
                        *, state: Any = None, storage_options: Any = None, filter: Any = None) -> None:
        """Write ``checkpoint`` (from ``module_state_dict`` & co.) atomically; every rank calls this.

        The default writes one file from rank 0; sharded strategies write the entries named in ``layout_keys``
        (the module's and optimizers' state, in this strategy's layout) as a directory of shards instead.
        A failed write raises on every rank, so no rank waits for one that gave up.
        Called in Lightning Fabric's order, ``save_checkpoint(path, state)``: see ``plugins/strategies/fabric_api.py``.
        """
        fabric_api = _strategies.fabric_api
        if fabric_api.is_fabric_call(checkpoint, path, state):
            fabric_api.save_checkpoint(self, checkpoint, path if state is None else state, storage_options, filter)
            return
        io = checkpoint_io_of(self)
        if isinstance(io, CheckpointIO):
            self.agree_on_rank_zero(lambda: io.save(checkpoint, path), "save_checkpoint")
        else:  # an object with Lightning's CheckpointIO methods only: its own save_checkpoint, called as Lightning does
            self.agree_on_rank_zero(lambda: io.save_checkpoint(checkpoint=checkpoint, path=path, storage_options=None),
                                    "save_checkpoint")

    def agree_on_rank_zero(self, work: Callable[[], Any], name: str) -> None:
        """Run ``work`` on rank 0; every rank then raises if it failed (one process: just run it)."""
        failure: str | None = None
        if self.is_global_zero:
            try:
                work()
            except Exception as err:
                if self.world_size == 1:
                    raise
                failure = str(err) or type(err).__name__
                self.broadcast(failure)
                raise
        failure = self.broadcast(failure)
        if failure is not None:
            raise RuntimeError(f"{name} failed on rank 0: {failure}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r})"


Strategy.__init__ = _check_keywords(Strategy.__init__)  # type: ignore[method-assign]
