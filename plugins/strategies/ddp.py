"""Data parallel: every process holds the whole model; gradients are averaged by DistributedDataParallel.

``training_step`` (and ``forward``, for a loop of one's own) runs through DDP's forward (a thin module whose
``forward`` calls the step), because
DDP prepares its gradient all-reduce in ``forward``. Evaluation and prediction steps call the module
directly: they need no gradient synchronisation. Accumulation steps run inside DDP's ``no_sync``.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
from lightning_utilities.core.rank_zero import rank_zero_deprecation

from plugins.launchers.spawn import START_METHODS, SpawnLauncher
from plugins.precision.base import Precision
from plugins.strategies.base import under_forward_context
from plugins.strategies.comm_hooks import COMM_HOOKS, register_comm_hook, wrap_post_local_sgd
from plugins.strategies.parallel import ParallelStrategy

# the methods whose gradients DDP synchronises: the Trainer's training_step, and forward for an own loop (Fabric)
GRADIENT_STEPS = ("training_step", "forward")


class _StepModule(torch.nn.Module):
    """Lets DDP's forward run any ``*_step`` method of the wrapped module."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.module, name)(*args, **kwargs)


class DDPSteps:
    """``training_step`` through a DDP wrapper's forward (``self.ddp``, around a ``_StepModule``); accumulation
    steps inside its ``no_sync``. Shared by every strategy that wraps the module in a DDP."""

    ddp: torch.nn.parallel.DistributedDataParallel | None
    precision: Precision

    def step_function(self, module: torch.nn.Module, name: str) -> Callable[..., Any]:
        if name not in GRADIENT_STEPS or self.ddp is None:
            return super().step_function(module, name)  # type: ignore[misc]
        return under_forward_context(self.precision, functools.partial(self.ddp, name))

    def on_stage_end(self) -> None:
        """The call's DDP wrapper goes, its gradient buckets with it (Lightning unwraps its model when each call
        ends); the next call wraps the module again."""
        self.ddp = None
        super().on_stage_end()  # type: ignore[misc]

    def no_backward_sync(self, enabled: bool) -> contextlib.AbstractContextManager:
        if enabled and self.ddp is not None:
            return self.ddp.no_sync()
        return contextlib.nullcontext()


def _buffer_sync(broadcast: bool) -> dict[str, bool]:
    """DDP's buffer synchronisation as Lightning's (and torch's) ``broadcast_buffers`` means it.

    Newer torch renamed ``broadcast_buffers`` to ``forward_sync_buffers``, but ``forward_sync_buffers=False`` still
    copies rank 0's buffers at construction; only ``broadcast_buffers=False`` leaves rank-local buffers alone, so
    False keeps the old name (its deprecation warning is silenced where DDP is built).
    """
    import inspect

    takes_new = "forward_sync_buffers" in inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters
    return {"forward_sync_buffers" if takes_new and broadcast else "broadcast_buffers": broadcast}


def _check_start_method(start_method: str, max_restarts: object) -> None:
    if start_method not in ("popen", *START_METHODS):
        raise ValueError(
            f"DDPStrategy(start_method={start_method!r}) is not valid; use 'popen' (run the program again per "
            f"worker) or one of {', '.join(START_METHODS)} (e.g. strategy=ddp_spawn or strategy=ddp_notebook)."
        )
    if start_method != "popen" and max_restarts:
        raise ValueError(
            f"DDPStrategy(start_method={start_method!r}, max_restarts={max_restarts}): spawned workers are not "
            "restarted; use start_method='popen' (workers started by the elastic agent) for restarts."
        )


def _is_post_local_sgd(state: object) -> bool:
    return type(state).__name__ == "PostLocalSGDState"  # torch's class, not imported for the check


def _check_torch_comm_hook(name: str | None, hook: Callable[..., Any] | None, wrapper: Callable[..., Any] | None,
                           state: object, period: int | None) -> None:
    """Lightning's ``ddp_comm_*`` arguments make sense together, and not with Relay's ``comm_hook`` by name."""
    if hook is not None and name is not None:
        raise ValueError(f"DDPStrategy(comm_hook={name!r}, ddp_comm_hook=...): give one communication hook, by name "
                         "(comm_hook=) or as torch's function (ddp_comm_hook=).")
    if hook is None and (wrapper is not None or state is not None):
        raise ValueError("DDPStrategy(ddp_comm_state=... / ddp_comm_wrapper=...) needs the hook itself: "
                         "ddp_comm_hook=<a torch.distributed.algorithms.ddp_comm_hooks function>.")
    if _is_post_local_sgd(state) and (period is None or period < 1):
        raise ValueError(f"DDPStrategy(ddp_comm_state=PostLocalSGDState(...), model_averaging_period={period!r}): "
                         "post-local SGD averages the model every model_averaging_period steps; give an int >= 1.")


class DDPStrategy(DDPSteps, ParallelStrategy):
    """``torch.nn.parallel.DistributedDataParallel`` with its options and gradient communication hooks."""

    name = "ddp"

    def __init__(
        self,
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        bucket_cap_mb: float | None = None,
        broadcast_buffers: bool | None = None,
        comm_hook: str | None = None,
        comm_hook_options: dict[str, Any] | None = None,
        start_method: str = "popen",
        ddp_comm_state: object | None = None,
        ddp_comm_hook: Callable[..., Any] | None = None,
        ddp_comm_wrapper: Callable[..., Any] | None = None,
        model_averaging_period: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Process-group arguments and the ``dp_replicate`` degree are ``ParallelStrategy``'s. ``start_method``
        (Lightning's): "popen" runs the program again for each worker (torchrun's way); "spawn", "fork" or
        "forkserver" start them from this process (``strategy="ddp_spawn"`` / ``"ddp_notebook"``)."""
        _check_start_method(start_method, kwargs.get("max_restarts"))
        super().__init__(**kwargs)
        self.start_method = start_method
        _check_torch_comm_hook(comm_hook, ddp_comm_hook, ddp_comm_wrapper, ddp_comm_state, model_averaging_period)
        # Lightning's form of a communication hook: torch's hook function, its state, a wrapper around it
        # (``ddp_comm_wrapper=default.fp16_compress_wrapper``); a ``PostLocalSGDState`` averages the model every
        # ``model_averaging_period`` steps
        self.ddp_comm_state, self.ddp_comm_hook = ddp_comm_state, ddp_comm_hook
        self.ddp_comm_wrapper, self.model_averaging_period = ddp_comm_wrapper, model_averaging_period
        if comm_hook is not None and comm_hook not in COMM_HOOKS:
            import difflib

            close = difflib.get_close_matches(str(comm_hook), list(COMM_HOOKS), n=2)
            near = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(
                f"DDPStrategy(comm_hook={comm_hook!r}) is not known.{near} Valid: {', '.join(COMM_HOOKS)} "
                "(or None for plain all-reduce), e.g. strategy.comm_hook=fp16_compress"
            )
        if bucket_cap_mb is not None and (not isinstance(bucket_cap_mb, (int, float)) or bucket_cap_mb <= 0):
            raise ValueError(f"DDPStrategy(bucket_cap_mb={bucket_cap_mb!r}) must be a positive number of MB.")
        self.ddp_kwargs: dict[str, Any] = {
            "find_unused_parameters": bool(find_unused_parameters),
            "static_graph": bool(static_graph),
            "gradient_as_bucket_view": bool(gradient_as_bucket_view),
        }
        if broadcast_buffers is not None:
            self.ddp_kwargs.update(_buffer_sync(bool(broadcast_buffers)))
        if bucket_cap_mb is not None:
            self.ddp_kwargs["bucket_cap_mb"] = bucket_cap_mb
        self.comm_hook = comm_hook
        self.comm_hook_options = dict(comm_hook_options or {})
        self.ddp: torch.nn.parallel.DistributedDataParallel | None = None
        self._hook_state: Any = None

    @property
    def launcher(self) -> Any:
        """The elastic launcher ("popen"), or workers started with ``torch.multiprocessing``."""
        if self.start_method == "popen":
            return super().launcher
        env = self.environment
        if env is None or env.creates_processes_externally or self.world_size == 1:
            return None
        if self.num_nodes > 1:
            raise ValueError(
                f"strategy={self.strategy_name!r} with num_nodes={self.num_nodes}: its workers are started with "
                "torch.multiprocessing on this node only. Use strategy='ddp' on every node (MASTER_ADDR, "
                "MASTER_PORT and NODE_RANK exported), or a cluster launcher (torchrun, srun).")
        port = env.main_port if "MASTER_PORT" in getattr(env, "env", {}) else None
        return SpawnLauncher(len(self.device_ids), self.start_method, env.main_address, port)

    @property
    def is_distributed(self) -> bool:
        """Lightning's legacy property (always True for DDP), deprecated there: kept for code that reads it."""
        rank_zero_deprecation(f"`{type(self).__name__}.is_distributed` is deprecated. Use is discouraged.",
                              stacklevel=6)
        return True

    def _check_backend(self) -> None:
        super()._check_backend()
        if self.comm_hook == "bf16_compress" and self.process_group_backend not in ("nccl", "xccl"):
            raise ValueError(
                f"DDPStrategy(comm_hook='bf16_compress') needs NCCL or XCCL (GPUs), but this run communicates over "
                f"{self.process_group_backend!r}. Use comm_hook='fp16_compress' on the CPU, or accelerator='cuda'."
            )

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        module = super().setup_module(module)
        if not any(p.requires_grad for p in module.parameters()):
            return module  # nothing to synchronise: DDP would refuse it
        device = self.root_device
        with warnings.catch_warnings():  # broadcast_buffers=False is deprecated, but the only "never sync" (below)
            warnings.filterwarnings("ignore", message="`broadcast_buffers` is deprecated", category=FutureWarning)
            self.ddp = torch.nn.parallel.DistributedDataParallel(
                _StepModule(module), device_ids=[device.index] if device.type in ("cuda", "xpu") else None,
                **self.ddp_kwargs,
            )
        if self.comm_hook is not None:
            self._hook_state = register_comm_hook(self.ddp, self.comm_hook, self.comm_hook_options,
                                                  local_size=len(self.device_ids))
        elif self.ddp_comm_hook is not None:
            hook = self.ddp_comm_hook if self.ddp_comm_wrapper is None else self.ddp_comm_wrapper(self.ddp_comm_hook)
            self.ddp.register_comm_hook(self.ddp_comm_state, hook)
            self._hook_state = self.ddp_comm_state
        return module

    def setup_optimizers(self, optimizers: list[torch.optim.Optimizer]) -> list[torch.optim.Optimizer]:
        if self.comm_hook == "post_local_sgd":
            return [wrap_post_local_sgd(o, self._hook_state, self.comm_hook_options) for o in optimizers]
        if _is_post_local_sgd(self.ddp_comm_state):
            period = {"period": self.model_averaging_period}
            return [wrap_post_local_sgd(o, self.ddp_comm_state, period) for o in optimizers]
        return optimizers

    def teardown(self) -> None:
        self.ddp = None
        super().teardown()
