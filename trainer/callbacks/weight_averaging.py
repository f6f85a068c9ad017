"""Averaged weights kept beside the model (``torch.optim.swa_utils.AveragedModel``), as Lightning's
``WeightAveraging``: updated after optimizer steps (or epochs) when ``should_update`` says, swapped in for
validation, saved as the checkpoint's ``state_dict`` and copied into the model when training ends."""

from __future__ import annotations

import itertools
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import torch

from trainer.callbacks.base import Callback
from trainer.callbacks.model_copy import detached_from_trainer, refuse_sharded
from trainer.module import Module as RelayModule
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from collections.abc import Iterator

    from torch.optim.swa_utils import AveragedModel

    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT


class WeightAveraging(Callback):
    """Subclass and override ``should_update`` to choose when to average; ``kwargs`` go to ``AveragedModel``
    (``avg_fn``, ``multi_avg_fn``); by default every optimizer step gives an equal-weight average."""

    def __init__(self, device: torch.device | str | int | None = None, use_buffers: bool = True,
                 **kwargs: Any) -> None:
        self._device: torch.device | int | None = torch.device(device) if isinstance(device, str) else device
        self._use_buffers = use_buffers
        self._kwargs = kwargs
        self._average_model: AveragedModel | None = None
        self._latest_update_step = 0
        self._latest_update_epoch = -1

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        """Called after each optimizer step (``step_idx``) and each epoch (``epoch_idx``)."""
        return step_idx is not None

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        if stage != "fit":
            return
        refuse_sharded(trainer, type(self).__name__)
        from lightning_utilities.core.overrides import is_overridden
        from torch.optim.swa_utils import AveragedModel

        if is_overridden("configure_model", pl_module, RelayModule):
            rank_zero_warn(f"You're using the {type(self).__name__} callback with a model that overrides "
                           "configure_model; the averaged copy is not sharded, so you may run out of memory.")
            pl_module.configure_model()
        with detached_from_trainer(pl_module):
            self._average_model = AveragedModel(model=pl_module, device=self._device or pl_module.device,
                                                use_buffers=self._use_buffers, **self._kwargs)

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int) -> None:
        step_idx = trainer.global_step - 1
        if trainer.global_step > self._latest_update_step and self.should_update(step_idx=step_idx):
            self._average_model.update_parameters(pl_module)
            self._latest_update_step = trainer.global_step

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        epoch = trainer.current_epoch
        if epoch > self._latest_update_epoch and self.should_update(epoch_idx=epoch):
            self._average_model.update_parameters(pl_module)
            self._latest_update_epoch = epoch

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        self._copy_average_to_current(pl_module)

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        if self._average_model is not None:
            self._swap_models(pl_module)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._average_model is not None:
            self._swap_models(pl_module)

    def state_dict(self) -> dict[str, Any]:
        return {"latest_update_step": self._latest_update_step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._latest_update_step = state_dict["latest_update_step"]

    def on_save_checkpoint(self, trainer: Trainer, pl_module: Module, checkpoint: dict[str, Any]) -> None:
        """The averaged weights become the checkpoint's ``state_dict``; the current ones go beside them."""
        if self._average_model is None:
            rank_zero_info(f"{type(self).__name__}: saving a checkpoint outside 'fit'; its state is not saved.")
            return
        average = self._average_model.state_dict()
        checkpoint["current_model_state"] = checkpoint["state_dict"]
        checkpoint["state_dict"] = {k[len("module."):]: v for k, v in average.items() if k.startswith("module.")}
        checkpoint["averaging_state"] = {k: v for k, v in average.items() if not k.startswith("module.")}

    def on_load_checkpoint(self, trainer: Trainer, pl_module: Module, checkpoint: dict[str, Any]) -> None:
        if self._average_model is None:
            rank_zero_warn(f"You're using the {type(self).__name__} callback, but loading a checkpoint outside the "
                           "'fit' stage; its state cannot be restored (fine for testing or prediction).")
        elif "current_model_state" in checkpoint and "averaging_state" in checkpoint:
            average = {"module." + k: v for k, v in checkpoint["state_dict"].items()}
            average |= checkpoint["averaging_state"]
            self._average_model.load_state_dict(average)
            pl_module.load_state_dict(checkpoint["current_model_state"])
        else:
            rank_zero_warn("The checkpoint was not created with WeightAveraging. Both the current and the average "
                           "model will be initialized with state_dict.")
            self._average_model.module.load_state_dict(deepcopy(checkpoint["state_dict"]), strict=False)

    def _pairs(self, pl_module: Module) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        average = self._average_model.module
        return zip(itertools.chain(average.parameters(), average.buffers()),
                   itertools.chain(pl_module.parameters(), pl_module.buffers()))

    def _swap_models(self, pl_module: Module) -> None:
        for average, current in self._pairs(pl_module):
            tmp = average.data.clone()
            average.data.copy_(current.data)
            current.data.copy_(tmp)

    def _copy_average_to_current(self, pl_module: Module) -> None:
        for average, current in self._pairs(pl_module):
            current.data.copy_(average.data)


class EMAWeightAveraging(WeightAveraging):
    """An exponential moving average of the weights (``decay``), from ``update_starting_at_step``/``_epoch`` on,
    every ``update_every_n_steps`` optimizer steps."""

    def __init__(
        self,
        device: torch.device | str | int | None = None,
        use_buffers: bool = True,
        decay: float = 0.999,
        update_every_n_steps: int = 1,
        update_starting_at_step: int | None = None,
        update_starting_at_epoch: int | None = None,
        **kwargs: Any,
    ) -> None:
        from torch.optim.swa_utils import get_ema_avg_fn

        super().__init__(device=device, use_buffers=use_buffers, **kwargs, avg_fn=get_ema_avg_fn(decay=decay))
        self.update_every_n_steps = update_every_n_steps
        self.update_starting_at_step = update_starting_at_step
        self.update_starting_at_epoch = update_starting_at_epoch

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        if step_idx is not None:
            started = self.update_starting_at_step is None or step_idx >= self.update_starting_at_step
            if started and self.update_every_n_steps > 0 and step_idx % self.update_every_n_steps == 0:
                return True
        if epoch_idx is not None:
            return self.update_starting_at_epoch is not None and epoch_idx >= self.update_starting_at_epoch
        return False
