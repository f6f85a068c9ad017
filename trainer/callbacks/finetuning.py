"""Freezing a model's parts before training and unfreezing them on a schedule, as Lightning's
``BaseFinetuning``/``BackboneFinetuning``; the parameter groups added on the way are saved, so a resumed fit
rebuilds the optimizer exactly."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch.nn import Module as TorchModule
from torch.nn import ModuleDict
from torch.nn.modules.batchnorm import _BatchNorm

from plugins.strategies.ddp import DDPStrategy
from plugins.strategies.deepspeed import DeepSpeedStrategy
from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.utilities.rank_zero import rank_zero_warn

if TYPE_CHECKING:
    from trainer.module import Module
    from trainer.trainer import Trainer

log = logging.getLogger(__name__)
Modules = TorchModule | Iterable[TorchModule | Iterable]


def multiplicative(epoch: int) -> float:
    """BackboneFinetuning's default ``lambda_func``: double the backbone's learning rate every epoch."""
    return 2.0


class BaseFinetuning(Callback):
    """Implement ``freeze_before_training(pl_module)`` and ``finetune_function(pl_module, epoch, optimizer)``."""

    def __init__(self) -> None:
        self._internal_optimizer_metadata: dict[int, list[dict[str, Any]]] = {}
        self._restarting = False
        # what is frozen now, by name; Lightning does not save it, so its resumed fit keeps the modules that
        # freeze_before_training froze frozen even after they were unfrozen: Relay resumes exactly
        self._frozen: dict[str, list[str]] = {}
        # parameters frozen when DDP wrapped the model: DDP never syncs their gradients, so this callback does
        # (Lightning does not: its ranks drift apart once the backbone is unfrozen, Lightning issue #20340)
        self._outside_ddp: list[torch.nn.Parameter] = []

    def state_dict(self) -> dict[str, Any]:
        return {"internal_optimizer_metadata": self._internal_optimizer_metadata, "frozen": self._frozen}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restarting = True
        self._internal_optimizer_metadata = state_dict.get("internal_optimizer_metadata", state_dict)
        self._frozen = state_dict.get("frozen", {})

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        """Resuming: give each optimizer back the parameter groups it had (by parameter name), and the modules
        their frozen state."""
        if trainer.world_size > 1 and isinstance(trainer.strategy, DDPStrategy):
            self._outside_ddp = [p for p in pl_module.parameters() if not p.requires_grad]
        if self._restarting:
            named = dict(pl_module.named_parameters())
            for opt_idx, optimizer in enumerate(trainer.optimizers):
                if opt_idx in self._internal_optimizer_metadata:
                    optimizer.param_groups = self._apply_mapping_to_param_groups(
                        self._internal_optimizer_metadata[opt_idx], named)
            if self._frozen:
                frozen, untracked = set(self._frozen["parameters"]), set(self._frozen["batch_norm_untracked"])
                for name, param in named.items():
                    param.requires_grad = name not in frozen
                for name, module in pl_module.named_modules():
                    if isinstance(module, _BatchNorm):
                        module.track_running_stats = name not in untracked
            self._restarting = False

    def on_before_optimizer_step(self, trainer: Trainer, pl_module: Module, optimizer: torch.optim.Optimizer) -> None:
        """Average across ranks the gradients DDP does not: those of parameters unfrozen after it was built."""
        for param in self._outside_ddp:
            if param.requires_grad and param.grad is not None:
                param.grad.copy_(trainer.strategy.all_reduce(param.grad, "mean"))

    def _record_frozen(self, pl_module: Module) -> None:
        self._frozen = {
            "parameters": [n for n, p in pl_module.named_parameters() if not p.requires_grad],
            "batch_norm_untracked": [n for n, m in pl_module.named_modules()
                                     if isinstance(m, _BatchNorm) and not m.track_running_stats],
        }

    @staticmethod
    def flatten_modules(modules: Modules) -> list[TorchModule]:
        """The leaf modules (and modules with their own parameters) under ``modules``."""
        if isinstance(modules, ModuleDict):
            modules = modules.values()
        if isinstance(modules, Iterable):
            found: list[TorchModule] = []
            for m in modules:
                found.extend(BaseFinetuning.flatten_modules(m))
            candidates: Iterable[TorchModule] = found
        else:
            candidates = modules.modules()
        return [m for m in candidates if not list(m.children()) or m._parameters]

    @staticmethod
    def filter_params(modules: Modules, train_bn: bool = True, requires_grad: bool = True) -> Generator:
        for mod in BaseFinetuning.flatten_modules(modules):
            if isinstance(mod, _BatchNorm) and not train_bn:
                continue
            for param in mod.parameters(recurse=False):
                if param.requires_grad == requires_grad:
                    yield param

    @staticmethod
    def make_trainable(modules: Modules) -> None:
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm):
                module.track_running_stats = True
            for param in module.parameters(recurse=False):
                param.requires_grad = True

    @staticmethod
    def freeze_module(module: TorchModule) -> None:
        if isinstance(module, _BatchNorm):
            module.track_running_stats = False
        for param in module.parameters(recurse=False):
            param.requires_grad = False

    @staticmethod
    def freeze(modules: Modules, train_bn: bool = True) -> None:
        """Freeze every parameter under ``modules``; BatchNorm layers stay trainable when ``train_bn``."""
        for mod in BaseFinetuning.flatten_modules(modules):
            if isinstance(mod, _BatchNorm) and train_bn:
                BaseFinetuning.make_trainable(mod)
            else:
                BaseFinetuning.freeze_module(mod)

    @staticmethod
    def filter_on_optimizer(optimizer: torch.optim.Optimizer, params: Iterable) -> list:
        """``params`` not already in ``optimizer`` (those are skipped, with a warning)."""
        kept, removed = [], []
        for param in params:
            held = any(torch.equal(p, param) for group in optimizer.param_groups for p in group["params"])
            (removed if held else kept).append(param)
        if removed:
            rank_zero_warn(
                "The provided params to be frozen already exist within another group of this optimizer. Those "
                "parameters will be skipped.\nHINT: Did you init your optimizer in `configure_optimizer` as such:\n "
                f"{type(optimizer)}(filter(lambda p: p.requires_grad, self.parameters()), ...) "
            )
        return kept

    @staticmethod
    def unfreeze_and_add_param_group(modules: Modules, optimizer: torch.optim.Optimizer, lr: float | None = None,
                                     initial_denom_lr: float = 10.0, train_bn: bool = True) -> None:
        """Unfreeze ``modules`` and add their parameters as a new group (lr: ``lr``, else group 0's / denom)."""
        BaseFinetuning.make_trainable(modules)
        params_lr = optimizer.param_groups[0]["lr"] if lr is None else float(lr)
        denom_lr = initial_denom_lr if lr is None else 1.0
        params = BaseFinetuning.filter_params(modules, train_bn=train_bn, requires_grad=True)
        params = BaseFinetuning.filter_on_optimizer(optimizer, params)
        if params:
            optimizer.add_param_group({"params": params, "lr": params_lr / denom_lr})

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        self.freeze_before_training(pl_module)
        if isinstance(trainer.strategy, DeepSpeedStrategy):
            raise NotImplementedError(
                "The Finetuning callback does not support running with the DeepSpeed strategy. Choose a different "
                "strategy or disable the callback."
            )

    @staticmethod
    def _apply_mapping_to_param_groups(param_groups: list[dict[str, Any]], mapping: dict) -> list[dict[str, Any]]:
        out = []
        for group in param_groups:
            state = {k: v for k, v in group.items() if k != "params"}
            state["params"] = [mapping[p] for p in group["params"]]
            out.append(state)
        return out

    def _store(self, pl_module: Module, opt_idx: int, num_param_groups: int,
               current_param_groups: list[dict[str, Any]]) -> None:
        mapping = {p: n for n, p in pl_module.named_parameters()}
        if opt_idx not in self._internal_optimizer_metadata:
            self._internal_optimizer_metadata[opt_idx] = self._apply_mapping_to_param_groups(current_param_groups,
                                                                                          mapping)
        elif num_param_groups != len(current_param_groups):
            self._internal_optimizer_metadata[opt_idx].extend(
                self._apply_mapping_to_param_groups(current_param_groups[num_param_groups:], mapping))

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        for opt_idx, optimizer in enumerate(trainer.optimizers):
            num_param_groups = len(optimizer.param_groups)
            self.finetune_function(pl_module, trainer.current_epoch, optimizer)
            self._store(pl_module, opt_idx, num_param_groups, optimizer.param_groups)
        self._record_frozen(pl_module)

    def finetune_function(self, pl_module: Module, epoch: int, optimizer: torch.optim.Optimizer) -> None:
        """Unfreeze (and add parameter groups) for ``epoch``; called at each training epoch's start."""
        raise NotImplementedError

    def freeze_before_training(self, pl_module: Module) -> None:
        """Freeze what should not train at first; called in ``setup``."""
        raise NotImplementedError


class BackboneFinetuning(BaseFinetuning):
    """Freezes ``pl_module.backbone``; at ``unfreeze_backbone_at_epoch`` adds it to the optimizer with a small
    learning rate that ``lambda_func`` then raises each epoch (capped at the main rate when ``should_align``)."""

    def __init__(
        self,
        unfreeze_backbone_at_epoch: int = 10,
        lambda_func: Callable = multiplicative,
        backbone_initial_ratio_lr: float = 10e-2,
        backbone_initial_lr: float | None = None,
        should_align: bool = True,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
        verbose: bool = False,
        rounding: int = 12,
    ) -> None:
        super().__init__()
        self.unfreeze_backbone_at_epoch = unfreeze_backbone_at_epoch
        self.lambda_func = lambda_func
        self.backbone_initial_ratio_lr = backbone_initial_ratio_lr
        self.backbone_initial_lr = backbone_initial_lr
        self.should_align = should_align
        self.initial_denom_lr = initial_denom_lr
        self.train_bn = train_bn
        self.verbose = verbose
        self.rounding = rounding
        self.previous_backbone_lr: float | None = None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "previous_backbone_lr": self.previous_backbone_lr}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.previous_backbone_lr = state_dict["previous_backbone_lr"]
        super().load_state_dict(state_dict)

    def on_fit_start(self, trainer: Trainer, pl_module: Module) -> None:
        if isinstance(getattr(pl_module, "backbone", None), TorchModule):
            return super().on_fit_start(trainer, pl_module)
        raise MisconfigurationError(
            f"The LightningModule should have a nn.Module `backbone` attribute; {type(pl_module).__name__} has none. "
            "Set self.backbone = ... in __init__, or subclass BaseFinetuning for another layout."
        )

    def freeze_before_training(self, pl_module: Module) -> None:
        self.freeze(pl_module.backbone)

    def finetune_function(self, pl_module: Module, epoch: int, optimizer: torch.optim.Optimizer) -> None:
        if epoch == self.unfreeze_backbone_at_epoch:
            current_lr = optimizer.param_groups[0]["lr"]
            initial = (self.backbone_initial_lr if self.backbone_initial_lr is not None
                       else current_lr * self.backbone_initial_ratio_lr)
            self.previous_backbone_lr = initial
            self.unfreeze_and_add_param_group(pl_module.backbone, optimizer, initial, train_bn=self.train_bn,
                                              initial_denom_lr=self.initial_denom_lr)
            if self.verbose:
                log.info(f"Current lr: {round(current_lr, self.rounding)}, "
                         f"Backbone lr: {round(initial, self.rounding)}")
        elif epoch > self.unfreeze_backbone_at_epoch:
            current_lr = optimizer.param_groups[0]["lr"]
            next_lr = self.lambda_func(epoch + 1) * self.previous_backbone_lr
            if self.should_align and next_lr > current_lr:
                next_lr = current_lr
            optimizer.param_groups[-1]["lr"] = next_lr
            self.previous_backbone_lr = next_lr
            if self.verbose:
                log.info(f"Current lr: {round(current_lr, self.rounding)}, "
                         f"Backbone lr: {round(next_lr, self.rounding)}")
