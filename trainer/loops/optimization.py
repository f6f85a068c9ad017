"""One training batch: automatic optimization (closure, accumulation, clipping) or manual."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from trainer.errors import MisconfigurationError, MisconfigurationRuntimeError

if TYPE_CHECKING:
    from trainer.trainer import Trainer


def _loss_of(output: Any) -> torch.Tensor | None:
    if output is None or isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        if "loss" not in output:
            raise MisconfigurationError(
                f"training_step returned a dict without a 'loss' key (keys: {sorted(output)}); include the loss."
            )
        return output["loss"]
    raise MisconfigurationError(
        f"training_step returned {type(output).__name__}; return the loss tensor, a dict with 'loss', or None to skip."
    )


def optimizer_step(trainer: Trainer, optimizer: torch.optim.Optimizer, closure: Any = None) -> Any:
    """Step through the strategy; ``on_before_optimizer_step`` and clipping run after the closure."""
    hooks, module = trainer._hooks, trainer.lightning_module

    def closure_then_hooks() -> Any:
        result = closure() if closure is not None else None
        before_step = hooks.caller("on_before_optimizer_step")
        if before_step is not None:
            before_step(optimizer)
        clip = trainer.gradient_clip_val or (module.automatic_optimization and hooks.has("configure_gradient_clipping"))
        if clip and (result is not None or closure is None):
            module.configure_gradient_clipping(optimizer, gradient_clip_val=trainer.gradient_clip_val,
                                               gradient_clip_algorithm=trainer.gradient_clip_algorithm)
        return result

    out = trainer.strategy.optimizer_step(optimizer, closure_then_hooks)
    if not module.automatic_optimization:
        trainer.global_step += 1
    return out


class TrainingStep:
    """Runs one batch; built once per fit so the per-batch path does no lookups."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.module = module = trainer.lightning_module
        hooks = trainer._hooks
        self.before_zero_grad = hooks.caller("on_before_zero_grad")
        self.before_backward = hooks.caller("on_before_backward")
        self.after_backward = hooks.caller("on_after_backward")
        self.step_fn = trainer.strategy.step_function(module, "training_step")
        self.strategy = trainer.strategy
        self.accumulate = trainer.accumulate_grad_batches
        self.optimizer = trainer.optimizers[0] if trainer.optimizers else None
        self.handle = trainer._optimizer_handles[0] if trainer._optimizer_handles else None
        from lightning_utilities.core.overrides import is_overridden

        from trainer.module import Module

        self.custom_step = is_overridden("optimizer_step", module, Module)
        self.custom_zero_grad = is_overridden("optimizer_zero_grad", module, Module)
        self.custom_backward = is_overridden("backward", module, Module)
        self.step_schedulers = [c for c in trainer.lr_scheduler_configs if c.interval == "step"]
        if module.automatic_optimization and len(trainer.optimizers) > 1:
            raise MisconfigurationRuntimeError(
                f"configure_optimizers returned {len(trainer.optimizers)} optimizers; automatic optimization uses one. "
                "Set self.automatic_optimization = False in __init__ and step them yourself in training_step."
            )
        if not module.automatic_optimization and (trainer.gradient_clip_val or self.accumulate > 1):
            raise MisconfigurationError(
                "Trainer(gradient_clip_val=..., accumulate_grad_batches=...) do not apply with manual optimization; "
                "call self.clip_gradients(...) and step every n batches in training_step instead."
            )

    def run(self, batch: Any, batch_idx: int, is_last: bool) -> Any:
        if not self.module.automatic_optimization:
            return self.step_fn(batch, batch_idx)
        trainer = self.trainer
        should_step = is_last or (batch_idx + 1) % self.accumulate == 0
        zero_grad_first = batch_idx % self.accumulate == 0
        holder: list[Any] = [{}]

        def closure() -> torch.Tensor | None:
            output = self.step_fn(batch, batch_idx)
            loss = _loss_of(output)
            if zero_grad_first and self.optimizer is not None:
                if self.before_zero_grad is not None:
                    self.before_zero_grad(self.optimizer)
                if self.custom_zero_grad:
                    self.module.optimizer_zero_grad(trainer.current_epoch, batch_idx, self.optimizer)
                else:
                    self.optimizer.zero_grad()
            if loss is None:  # skip this batch: no backward; a step finds no new gradients
                return None
            scaled = loss / self.accumulate if self.accumulate > 1 else loss
            if self.before_backward is not None:
                self.before_backward(scaled)
            if self.custom_backward:
                self.module.backward(scaled)
            else:
                self.strategy.backward(scaled)
            if self.after_backward is not None:
                self.after_backward()
            extra = {k: v for k, v in output.items() if k != "loss"} if isinstance(output, dict) else {}
            holder[0] = {"loss": scaled.detach(), **extra}
            return scaled

        if self.optimizer is None:
            closure()
        elif not should_step:
            with self.strategy.no_backward_sync(True):
                closure()
        else:
            if self.custom_step:
                self.module.optimizer_step(trainer.current_epoch, batch_idx, self.handle, closure)
            else:
                optimizer_step(trainer, self.optimizer, closure)
            trainer.global_step += 1
            if self.step_schedulers:
                step_schedulers(trainer, self.step_schedulers, trainer.global_step)
        return holder[0]


def step_schedulers(trainer: Trainer, configs: list[Any], counter: int) -> None:
    """Step each scheduler whose frequency divides ``counter``; plateau schedulers get their metric."""
    module = trainer.lightning_module
    for config in configs:
        if counter % config.frequency:
            continue
        metric = None
        if config.reduce_on_plateau:
            metrics = trainer.callback_metrics
            if config.monitor not in metrics:
                if config.strict:
                    raise MisconfigurationError(
                        f"The lr_scheduler monitors {config.monitor!r}, which was never logged. "
                        f"Logged keys: {sorted(metrics) or 'none'}. Log it with self.log({config.monitor!r}, ...)."
                    )
                continue
            metric = metrics[config.monitor]
        module.lr_scheduler_step(config.scheduler, metric)
