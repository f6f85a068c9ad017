"""Stochastic Weight Averaging (Izmailov et al., 2018) with Lightning's arguments and schedule.

From ``swa_epoch_start`` on, the epoch's starting weights are averaged into a copy of the model and the
learning rate follows ``torch.optim.swa_utils.SWALR`` (swapped in for the user's scheduler). At the end the
averaged weights replace the model's; a model with BatchNorm gets one more epoch of forward passes (no
optimizer step) so its running statistics match the averaged weights.
"""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from trainer.callbacks.base import Callback
from trainer.callbacks.model_copy import detached_from_trainer, refuse_sharded
from trainer.errors import MisconfigurationError
from trainer.model.optimizers import LRSchedulerConfig
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from torch.optim.swa_utils import SWALR

    from trainer.module import Module
    from trainer.trainer import Trainer

_AVG_FN = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class StochasticWeightAveraging(Callback):
    """``StochasticWeightAveraging(swa_lrs=1e-2)``; one optimizer and at most one scheduler, as in Lightning."""

    def __init__(
        self,
        swa_lrs: float | list[float],
        swa_epoch_start: float = 0.8,
        annealing_epochs: int = 10,
        annealing_strategy: Literal["cos", "linear"] = "cos",
        avg_fn: _AVG_FN | None = None,
        device: torch.device | str | None = torch.device("cpu"),
    ) -> None:
        if isinstance(swa_epoch_start, bool) or not isinstance(swa_epoch_start, (int, float)) or (
            isinstance(swa_epoch_start, int) and swa_epoch_start < 1) or (
                isinstance(swa_epoch_start, float) and not 0 <= swa_epoch_start <= 1):
            raise MisconfigurationError(
                f"StochasticWeightAveraging(swa_epoch_start={swa_epoch_start!r}): swa_epoch_start should be a >0 "
                "integer or a float between 0 and 1, e.g. swa_epoch_start=0.8 (the last 20% of the epochs)."
            )
        lrs_ok = (isinstance(swa_lrs, float) and swa_lrs > 0) or (
            isinstance(swa_lrs, list) and all(isinstance(lr, float) and lr > 0 for lr in swa_lrs))
        if not lrs_ok:
            raise MisconfigurationError(
                f"StochasticWeightAveraging(swa_lrs={swa_lrs!r}): the `swa_lrs` should a positive float, or a list of "
                "positive floats (one per parameter group), e.g. swa_lrs=1e-2."
            )
        if annealing_strategy not in ("cos", "linear"):
            raise MisconfigurationError(
                f"StochasticWeightAveraging(annealing_strategy={annealing_strategy!r}): use 'cos' or 'linear'."
            )
        if avg_fn is not None and not callable(avg_fn):
            raise MisconfigurationError(
                f"StochasticWeightAveraging(avg_fn={avg_fn!r}): The `avg_fn` should be callable.")
        if device is not None and not isinstance(device, (torch.device, str)):
            raise MisconfigurationError(
                f"StochasticWeightAveraging(device={device!r}): device is expected to be a torch.device or a str "
                "(or None: the model's device)."
            )
        self.n_averaged: torch.Tensor | None = None
        self._swa_epoch_start = swa_epoch_start
        self._swa_lrs = swa_lrs
        self._annealing_epochs = annealing_epochs
        self._annealing_strategy = annealing_strategy
        self._avg_fn = avg_fn or self.avg_fn
        self._device = device
        self._model_contains_batch_norm: bool | None = None
        self._average_model: nn.Module | None = None
        self._initialized = False
        self._swa_scheduler: SWALR | None = None
        self._scheduler_state: dict[str, Any] | None = None
        self._init_n_averaged = 0
        self._latest_update_epoch = -1
        self.momenta: dict[nn.modules.batchnorm._BatchNorm, float | None] = {}
        self._max_epochs = -1
        self._accumulate_grad_batches = 1

    @property
    def swa_start(self) -> int:
        """The first averaged epoch, 0-based (``swa_epoch_start`` is 1-based)."""
        return max(int(self._swa_epoch_start) - 1, 0)

    @property
    def swa_end(self) -> int | float:
        return float("inf") if self._max_epochs == -1 else self._max_epochs - 1

    @staticmethod
    def pl_module_contains_batch_norm(pl_module: nn.Module) -> bool:
        return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in pl_module.modules())

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        refuse_sharded(trainer, "SWA")
        with detached_from_trainer(pl_module):
            self._average_model = deepcopy(pl_module)

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        if len(trainer.optimizers) != 1:
            raise MisconfigurationError(
                f"SWA currently works with 1 `optimizer`; configure_optimizers returned {len(trainer.optimizers)}."
            )
        if len(trainer.lr_scheduler_configs) > 1:
            raise MisconfigurationError(
                f"SWA currently not supported for more than 1 `lr_scheduler` (got {len(trainer.lr_scheduler_configs)})."
            )
        if isinstance(self._swa_epoch_start, float):
            if trainer.max_epochs == -1:
                raise MisconfigurationError(
                    "SWA with `swa_epoch_start` as a float is not supported when `max_epochs=-1`. "
                    "Please provide `swa_epoch_start` as an integer."
                )
            self._swa_epoch_start = int(trainer.max_epochs * self._swa_epoch_start)
        self._model_contains_batch_norm = self.pl_module_contains_batch_norm(pl_module)
        self._max_epochs = trainer.max_epochs
        if self._model_contains_batch_norm and trainer.max_epochs != -1:
            trainer.fit_loop.max_epochs += 1  # the epoch that recomputes BatchNorm statistics
        if self._scheduler_state is not None:  # resumed after SWA began: its scheduler replaces the user's
            trainer.lr_scheduler_configs.clear()

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        epoch = trainer.current_epoch
        if not self._initialized and self.swa_start <= epoch <= self.swa_end:
            self._initialized = True
            self._start_swa(trainer, pl_module)
        if self.swa_start <= epoch <= self.swa_end and epoch > self._latest_update_epoch:
            self.update_parameters(self._average_model, pl_module, self.n_averaged, self._avg_fn)
            self._latest_update_epoch = epoch
        if self._max_epochs != -1 and epoch == self.swa_end + 1:  # only with BatchNorm: forward passes only
            self.transfer_weights(self._average_model, pl_module)
            self.reset_batch_norm_and_save_state(pl_module)
            if not isinstance(trainer.fit_loop.max_batches, int):
                raise MisconfigurationError(
                    "StochasticWeightAveraging with BatchNorm needs a train loader with a length (Iterable-style "
                    "datasets are not supported)."
                )
            # forward passes only, accumulated over the whole epoch; as in Lightning the epoch's last batch
            # still steps the optimizer (with the gradients left from the last training step)
            trainer.fit_loop._skip_backward = True
            self._accumulate_grad_batches = trainer.accumulate_grad_batches
            trainer.accumulate_grad_batches = trainer.fit_loop.max_batches + 1

    def _start_swa(self, trainer: Trainer, pl_module: Module) -> None:
        from torch.optim.swa_utils import SWALR

        self._average_model = self._average_model.to(self._device or pl_module.device)
        optimizer = trainer.optimizers[0]
        if isinstance(self._swa_lrs, float):
            self._swa_lrs = [self._swa_lrs] * len(optimizer.param_groups)
        for lr, group in zip(self._swa_lrs, optimizer.param_groups):
            group["initial_lr"] = lr
        self._swa_scheduler = SWALR(
            optimizer, swa_lr=self._swa_lrs, anneal_epochs=self._annealing_epochs,
            anneal_strategy=self._annealing_strategy,
            last_epoch=trainer.max_epochs if self._annealing_strategy == "cos" else -1,
        )
        if self._scheduler_state is not None:
            self._swa_scheduler.load_state_dict(self._scheduler_state)
        elif trainer.current_epoch != self.swa_start:
            rank_zero_warn("SWA is initializing after swa_start without any checkpoint data. "
                           "This may be caused by loading a checkpoint from an older version.")
        config = LRSchedulerConfig(self._swa_scheduler)
        if trainer.lr_scheduler_configs:
            old = trainer.lr_scheduler_configs[0]
            if old.interval != "epoch" or old.frequency != 1:
                rank_zero_warn(f"SWA is currently only supported every epoch. Found {old}")
            rank_zero_info(f"Swapping scheduler `{type(old.scheduler).__name__}` "
                           f"for `{type(self._swa_scheduler).__name__}`")
            trainer.lr_scheduler_configs[0] = config
        else:
            trainer.lr_scheduler_configs.append(config)
        if self.n_averaged is None:
            self.n_averaged = torch.tensor(self._init_n_averaged, dtype=torch.long, device=pl_module.device)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        trainer.fit_loop._skip_backward = False

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        bn_epoch_ran = self._model_contains_batch_norm and self._max_epochs != -1 and (
            trainer.current_epoch - 1 == self.swa_end + 1)
        if bn_epoch_ran:
            trainer.accumulate_grad_batches = self._accumulate_grad_batches
            trainer.fit_loop.max_epochs -= 1
            self.reset_momenta()
        elif trainer.current_epoch - 1 == self.swa_end or self._max_epochs == -1:
            if self._average_model is not None:
                self.transfer_weights(self._average_model, pl_module)

    @staticmethod
    def transfer_weights(src_pl_module: nn.Module, dst_pl_module: nn.Module) -> None:
        for src, dst in zip(src_pl_module.parameters(), dst_pl_module.parameters()):
            dst.detach().copy_(src.to(dst.device))

    def reset_batch_norm_and_save_state(self, pl_module: nn.Module) -> None:
        """Fresh statistics with a cumulative average (momentum None), as ``torch.optim.swa_utils.update_bn``."""
        self.momenta = {}
        for module in pl_module.modules():
            if not isinstance(module, nn.modules.batchnorm._BatchNorm):
                continue
            if module.running_mean is not None:
                module.running_mean = torch.zeros_like(module.running_mean)
            if module.running_var is not None:
                module.running_var = torch.ones_like(module.running_var)
            self.momenta[module] = module.momentum
            module.momentum = None
            if module.num_batches_tracked is not None:
                module.num_batches_tracked *= 0

    def reset_momenta(self) -> None:
        for bn_module, momentum in self.momenta.items():
            bn_module.momentum = momentum

    @staticmethod
    def update_parameters(average_model: nn.Module, model: nn.Module, n_averaged: torch.Tensor,
                          avg_fn: _AVG_FN) -> None:
        for p_swa, p_model in zip(average_model.parameters(), model.parameters()):
            device = p_swa.device
            p_swa_, p_model_ = p_swa.detach(), p_model.detach().to(device)
            p_swa_.copy_(p_model_ if n_averaged == 0 else avg_fn(p_swa_, p_model_, n_averaged.to(device)))
        n_averaged += 1

    @staticmethod
    def avg_fn(averaged_model_parameter: torch.Tensor, model_parameter: torch.Tensor,
               num_averaged: torch.Tensor) -> torch.Tensor:
        """The running mean: equal weight for every averaged epoch."""
        return averaged_model_parameter + (model_parameter - averaged_model_parameter) / (num_averaged + 1)

    def state_dict(self) -> dict[str, Any]:
        return {
            "n_averaged": 0 if self.n_averaged is None else self.n_averaged.item(),
            "latest_update_epoch": self._latest_update_epoch,
            "scheduler_state": None if self._swa_scheduler is None else self._swa_scheduler.state_dict(),
            "average_model_state": None if self._average_model is None else self._average_model.state_dict(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._init_n_averaged = state_dict["n_averaged"]
        self._latest_update_epoch = state_dict["latest_update_epoch"]
        self._scheduler_state = state_dict["scheduler_state"]
        if self._average_model is not None and state_dict["average_model_state"] is not None:
            self._average_model.load_state_dict(state_dict["average_model_state"])
