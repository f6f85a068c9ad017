"""``Module``: the user's model plus its training logic, with Lightning 2.x hook names.

A Module never knows about ranks or devices; everything distributed lives in the strategy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import torch

from trainer.distributed import strategy as calls
from trainer.data.transfer_hooks import DataHooks
from trainer.errors import LoaderNotImplementedError, MisconfigurationError
from trainer.model.hparams import HyperparametersMixin
from trainer.distributed.ranks import set_rank_zero_only
from trainer.metrics.results import group_all_reduce, reduce_name
from trainer.utilities.rank_zero import rank_zero_warn

set_rank_zero_only()

if TYPE_CHECKING:
    import io
    from collections.abc import Callable, Sequence

    import torchmetrics
    from torch.distributed.device_mesh import DeviceMesh
    from torch.onnx import ONNXProgram
    from typing_extensions import Self

    from trainer.callbacks.base import Callback
    from trainer.fabric.fabric import Fabric
    from trainer.fabric.utilities.types import _MAP_LOCATION_TYPE
    from trainer.loggers.base import BaseLogger, Logger
    from trainer.model.optimizers import OptimizerHandle
    from trainer.trainer import Trainer
    from trainer.utilities.types import (
        EVAL_DATALOADERS,
        STEP_OUTPUT,
        TRAIN_DATALOADERS,
        LRSchedulerPLType,
        OptimizerLRScheduler,
    )


class NotAttachedError(RuntimeError, AttributeError):
    """Also an AttributeError, so ``hasattr(module, "trainer")`` (as ``torch.jit.trace`` probes) is simply False."""


class Module(DataHooks, HyperparametersMixin, torch.nn.Module):
    """Subclass and implement ``training_step`` and ``configure_optimizers``; override hooks as needed."""

    # the checkpoint keys this class's hyperparameters are saved under (Lightning's names and values)
    CHECKPOINT_HYPER_PARAMS_KEY = "hyper_parameters"
    CHECKPOINT_HYPER_PARAMS_NAME = "hparams_name"
    CHECKPOINT_HYPER_PARAMS_TYPE = "hparams_type"
    # properties TorchScript must not compile (they reach the Trainer or iterate parameters)
    __jit_unused_properties__: list[str] = [
        "trainer", "device", "device_mesh", "dtype", "on_gpu", "fabric", "strict_loading", "current_epoch",
        "global_step", "global_rank", "local_rank", "logger", "loggers", "hparams", "hparams_initial",
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._trainer: Trainer | None = None
        self._fabric: Fabric | None = None  # set by Fabric.setup: the module then runs under it (model/fabric_use.py)
        self._fabric_optimizers: list[Any] = []
        self.automatic_optimization: bool = True
        self.example_input_array: torch.Tensor | tuple | dict | None = None
        self._strict_loading: bool | None = None

    # --- what the Trainer provides ----------------------------------------------------------------
    @property
    def trainer(self) -> Trainer:
        fabric = self.__dict__.get("_fabric")
        if fabric is not None:
            from trainer.model.fabric_use import FabricTrainerView  # local import: only modules Fabric set up

            return FabricTrainerView(fabric)  # type: ignore[return-value]
        if self._trainer is None:
            raise NotAttachedError(f"{type(self).__name__} is not attached to a Trainer; call it inside Trainer.fit().")
        return self._trainer

    @trainer.setter
    def trainer(self, trainer: Trainer | None) -> None:
        self._trainer = trainer

    def __getattr__(self, name: str) -> Any:
        # Python retries a property that raised AttributeError here; for ``trainer`` that would replace the
        # RuntimeError Lightning's code catches (``except RuntimeError`` around ``self.trainer``) with nn.Module's
        # plain AttributeError
        if name == "trainer":
            raise NotAttachedError(f"{type(self).__name__} is not attached to a Trainer; call it inside Trainer.fit().")
        return torch.nn.Module.__getattr__(self, name)

    @property
    def device(self) -> torch.device:
        """The strategy's device while a Trainer holds the module, else its parameters' (CPU without any): after a
        call the strategy moved it back to the CPU (``Strategy.on_stage_end``), so that is where it is. A stand-in
        trainer (a test's ``Mock``) has no device to give: its module answers from its parameters, as Lightning's
        answers from its own record of where it was moved, never from the trainer."""
        strategy = getattr(self._trainer, "strategy", None)
        root = getattr(strategy, "root_device", None)
        if isinstance(root, torch.device) and getattr(strategy, "module_on_cpu", False) is not True:
            return root
        for p in self.parameters():
            return p.device
        return torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the module's floating-point parameters (buffers if it has none), else torch's default.

        Read from the tensors, so ``.to(dtype)``, ``.half()``, ``.double()`` and a precision plugin's cast all show.
        """
        for tensors in (self.parameters(), self.buffers()):
            for t in tensors:
                if t.is_floating_point():
                    return t.dtype
        return torch.get_default_dtype()

    @dtype.setter
    def dtype(self, value: str | torch.dtype) -> None:
        raise RuntimeError(f"{type(self).__name__}.dtype cannot be set; convert the module with .to({value}).")

    @property
    def on_gpu(self) -> bool:
        """Whether the module runs on a CUDA device (ROCm included: torch names it "cuda" too)."""
        return self.device.type == "cuda"

    @property
    def strict_loading(self) -> bool:
        """``load_state_dict(strict=...)`` when the Trainer or ``load_from_checkpoint`` restores this module.

        Set it to False for a module whose ``state_dict`` leaves weights out on purpose (e.g. a frozen backbone).
        """
        return self._strict_loading in (None, True)

    @strict_loading.setter
    def strict_loading(self, value: bool) -> None:
        self._strict_loading = value

    @property
    def fabric(self) -> Fabric | None:
        """The Fabric object that set this module up (``fabric.setup(module)``), else None."""
        return self.__dict__.get("_fabric")

    @fabric.setter
    def fabric(self, value: Fabric | None) -> None:
        for child in self.children():
            if isinstance(child, Module):
                child.fabric = value
        self.__dict__["_fabric"] = value

    @property
    def device_mesh(self) -> DeviceMesh | None:
        """The strategy's ``DeviceMesh`` (FSDP / model parallel), for ``configure_model``; None otherwise."""
        return getattr(self._trainer.strategy, "device_mesh", None) if self._trainer is not None else None

    @property
    def current_epoch(self) -> int:
        return self._trainer.current_epoch if self._trainer is not None else 0

    @property
    def global_step(self) -> int:
        return self._trainer.global_step if self._trainer is not None else 0

    @property
    def global_rank(self) -> int:
        return self._trainer.global_rank if self._trainer is not None else 0

    @property
    def local_rank(self) -> int:
        return self._trainer.local_rank if self._trainer is not None else 0

    @property
    def logger(self) -> Logger | BaseLogger | None:
        fabric = self.__dict__.get("_fabric")
        if fabric is not None:
            return fabric.logger
        return self._trainer.logger if self._trainer is not None else None

    @property
    def loggers(self) -> list[Logger] | list[BaseLogger]:
        fabric = self.__dict__.get("_fabric")
        if fabric is not None:
            return fabric.loggers
        return self._trainer.loggers if self._trainer is not None else []

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` on global rank 0 only; through the progress bar when one is drawing, so its line stays whole."""
        if self.global_rank != 0:
            return
        trainer = self._trainer
        bar = getattr(trainer, "progress_bar_callback", None) if trainer is not None else None
        if bar is not None and bar.is_enabled:
            bar.print(*args, **kwargs)
        else:
            print(*args, **kwargs)

    def all_gather(self, data: torch.Tensor | dict | list | tuple, group: Any | None = None, sync_grads: bool = False,
                   ) -> torch.Tensor | dict | list | tuple:
        """Every process's ``data`` (a tensor, number or collection of them), stacked along a new first dimension.

        Each tensor comes back with shape (world_size, ...); on one process it comes back as it is. Numbers
        become tensors. Every process must call it with the same shapes. ``sync_grads=True`` lets gradients
        flow back through the gather.
        """
        trainer = self._trainer
        if trainer is None:  # raised here, not by the property: nn.Module would turn that into a bare AttributeError
            raise NotAttachedError(f"{type(self).__name__} is not attached to a Trainer; all_gather runs inside a fit.")
        return calls.gather(trainer.strategy, data, self.device, group=group, sync_grads=sync_grads)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its Trainer (``torch.save(model)`` after a fit), as Lightning does."""
        state = dict(self.__dict__)
        state["_trainer"] = None
        return state

    # --- logging ----------------------------------------------------------------------------------
    def log(
        self,
        name: str,
        value: torchmetrics.Metric | torch.Tensor | float,
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: Any | None = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        metric_attribute: str | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """Record a metric: per step, aggregated per epoch (weighted by ``batch_size``), or both.

        Lightning's signature, in its order. ``sync_dist`` reduces the value over the processes (over
        ``sync_dist_group`` when given); ``rank_zero_only=True`` (logged from rank 0 alone) never synchronises, so it
        cannot deadlock; ``add_dataloader_idx=False`` keeps the name as given with several evaluation loaders.
        ``enable_graph`` and ``metric_attribute`` are accepted as Lightning's: values are stored detached, and a
        torchmetrics ``Metric`` is found by the object itself. The Trainer's side is inline here, not a call into
        it: this runs on every step of most modules.
        """
        trainer = self._trainer
        if trainer is None:
            if self.__dict__.get("_fabric") is not None:  # run by Fabric: straight to its loggers
                from trainer.model.fabric_use import log_through_fabric  # local import: only modules Fabric set up

                log_through_fabric(self._fabric, {name: value}, logger)
            else:  # not an error: a step may be tried without a Trainer (Lightning's warning)
                rank_zero_warn("You are trying to `self.log()` but the `self.trainer` reference is not registered on "
                               "the model yet. This is most likely because the model hasn't been passed to the "
                               "`Trainer`")
            return
        if logger is True and not trainer.loggers:
            rank_zero_warn(f"You called `self.log({name!r}, ..., logger=True)` but have no logger configured. You can "
                           "enable one by doing `Trainer(logger=ALogger(...))`")
        results = trainer.stage_run.active_results
        if results is None:
            raise trainer.stage_run.not_recording(name)
        if add_dataloader_idx and trainer.stage_run.log_suffix:
            name += trainer.stage_run.log_suffix
        if on_step is None:
            on_step = trainer.stage_run.on_step
        if on_epoch is None:
            on_epoch = not trainer.stage_run.on_step
        if not (on_step or on_epoch):
            raise MisconfigurationError(f"`self.log(on_step=False, on_epoch=False)` is not useful: {name!r} would be "
                                        "recorded nowhere; log it per step, per epoch, or both.")
        sync = sync_dist and not rank_zero_only
        reduce = trainer.strategy.all_reduce if sync_dist_group is None else group_all_reduce(sync_dist_group)
        results.add(
            name, value, (prog_bar, logger is not False, on_step, on_epoch),
            "mean" if reduce_fx == "mean" else reduce_name(reduce_fx), sync,
            batch_size if batch_size is not None else trainer.stage_run.infer_batch_size, reduce,
        )

    def log_dict(
        self,
        dictionary: Mapping[str, Any],
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: Any | None = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """``self.log`` for each item (Lightning's signature); a torchmetrics ``MetricCollection`` logs each metric."""
        if self._trainer is None and self.__dict__.get("_fabric") is not None:
            from trainer.model.fabric_use import log_through_fabric  # local import: only modules Fabric set up

            log_through_fabric(self._fabric, dictionary, logger)
            return
        for name, value in dictionary.items():
            self.log(name, value, prog_bar, logger, on_step, on_epoch, reduce_fx, enable_graph, sync_dist,
                     sync_dist_group, add_dataloader_idx, batch_size, None, rank_zero_only)

    # --- steps --------------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented.")

    def training_step(self, *args: Any, **kwargs: Any) -> STEP_OUTPUT:
        raise NotImplementedError(
            f"{type(self).__name__}.training_step is not implemented; Trainer.fit needs it to return a loss."
        )

    def validation_step(self, *args: Any, **kwargs: Any) -> STEP_OUTPUT:
        return None

    def test_step(self, *args: Any, **kwargs: Any) -> STEP_OUTPUT:
        raise NotImplementedError(f"{type(self).__name__}.test_step is not implemented; Trainer.test needs it.")

    def predict_step(self, *args: Any, **kwargs: Any) -> Any:
        batch = args[0] if args else kwargs.get("batch")
        return self(batch)

    # --- configuration ------------------------------------------------------------------------------
    def configure_optimizers(self) -> OptimizerLRScheduler:
        raise NotImplementedError(
            f"{type(self).__name__}.configure_optimizers is not implemented; return an optimizer, a list, "
            "(optimizers, schedulers) or {'optimizer': ..., 'lr_scheduler': ...}."
        )

    def configure_model(self) -> None:
        """Build layers here to create them directly on the strategy's device (or sharded)."""

    def configure_sharded_model(self) -> None:
        """Deprecated (Lightning's older name): override ``configure_model`` instead. Called when overridden."""

    def configure_callbacks(self) -> Sequence[Callback] | Callback:
        return []

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def clip_gradients(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip ``optimizer``'s gradients by norm or by value. A value or algorithm the Trainer was also given must be
        the same (Lightning's rule: one place decides); unset, the Trainer's is used."""
        fabric = self.__dict__.get("_fabric")
        if fabric is not None:  # run by Fabric: its clip_gradients
            from trainer.model.fabric_use import clip_through_fabric  # local import: only modules Fabric set up

            clip_through_fabric(fabric, self, optimizer, gradient_clip_val, gradient_clip_algorithm)
            return
        trainer = self.trainer
        given_val, given_algorithm = trainer.gradient_clip_val, trainer.gradient_clip_algorithm
        if gradient_clip_val is None:
            gradient_clip_val = given_val or 0.0
        elif given_val is not None and given_val != gradient_clip_val:
            raise MisconfigurationError(
                f"You have set `Trainer(gradient_clip_val={given_val!r})` and have passed "
                f"`clip_gradients(gradient_clip_val={gradient_clip_val!r})`. Please use only one of them.")
        if gradient_clip_algorithm is None:
            algorithm = str(getattr(given_algorithm, "value", given_algorithm) or "norm")
        else:
            algorithm = str(getattr(gradient_clip_algorithm, "value", gradient_clip_algorithm)).lower()
            trainer_algorithm = getattr(given_algorithm, "value", given_algorithm)
            if trainer_algorithm is not None and trainer_algorithm != algorithm:
                raise MisconfigurationError(
                    f"You have set `Trainer(gradient_clip_algorithm={trainer_algorithm!r})` and have passed "
                    f"`clip_gradients(gradient_clip_algorithm={algorithm!r}) Please use only one of them.")
        if isinstance(gradient_clip_val, bool) or not isinstance(gradient_clip_val, (int, float)):
            raise TypeError(f"`gradient_clip_val` should be an int or a float. Got {gradient_clip_val}.")
        if algorithm not in ("norm", "value"):
            raise MisconfigurationError(
                f"`gradient_clip_algorithm` {algorithm} is invalid. Allowed algorithms: ['value', 'norm'].")
        if gradient_clip_val == 0:
            return
        raw = getattr(optimizer, "optimizer", optimizer)
        trainer.strategy.clip_gradients(self, raw, float(gradient_clip_val), algorithm)

    # --- optimization -------------------------------------------------------------------------------
    def optimizers(self, use_pl_optimizer: bool = True) -> OptimizerHandle | list[OptimizerHandle]:
        if self.__dict__.get("_fabric") is not None:  # the optimizers Fabric set up with this module
            fabric_opts = self._fabric_optimizers
            return fabric_opts[0] if len(fabric_opts) == 1 else list(fabric_opts)
        opts = self.trainer.stage_run.optimizer_handles if use_pl_optimizer else self.trainer.optimizers
        return opts[0] if len(opts) == 1 else list(opts)

    def lr_schedulers(self) -> LRSchedulerPLType | list[LRSchedulerPLType] | None:
        schedulers = [config.scheduler for config in self.trainer.lr_scheduler_configs]
        if not schedulers:
            return None
        return schedulers[0] if len(schedulers) == 1 else schedulers

    def toggle_optimizer(self, optimizer: torch.optim.Optimizer | OptimizerHandle) -> None:
        """Only ``optimizer``'s parameters require grad until ``untoggle_optimizer`` (for GAN-style steps): the
        parameters of the Trainer's other optimizers stop requiring grad (a parameter shared with ``optimizer`` keeps
        its own setting); parameters no optimizer holds are left alone, as Lightning does. Without a Trainer, every
        other parameter of the module stops requiring grad."""
        raw = getattr(optimizer, "optimizer", optimizer)
        saved: dict[torch.Tensor, bool] = {}
        for p in self._toggle_scope():
            if p not in saved:
                saved[p] = p.requires_grad
                p.requires_grad = False
        for group in raw.param_groups:
            for p in group["params"]:
                p.requires_grad = saved.get(p, p.requires_grad)
        self._toggled_requires_grad = saved

    def untoggle_optimizer(self, optimizer: torch.optim.Optimizer | OptimizerHandle) -> None:
        """Put back what ``toggle_optimizer`` changed."""
        raw = getattr(optimizer, "optimizer", optimizer)
        mine = {p for group in raw.param_groups for p in group["params"]}
        for p, requires_grad in getattr(self, "_toggled_requires_grad", {}).items():
            if p not in mine:
                p.requires_grad = requires_grad
        self._toggled_requires_grad = {}

    def _toggle_scope(self) -> Iterator[torch.Tensor]:
        """The parameters a toggle switches: those of the Trainer's optimizers, else the module's."""
        if self._trainer is None or not self._trainer.optimizers:
            yield from self.parameters()
            return
        for opt in self._trainer.optimizers:
            for group in getattr(opt, "optimizer", opt).param_groups:
                yield from group["params"]

    @contextmanager
    def toggled_optimizer(self, optimizer: torch.optim.Optimizer | OptimizerHandle) -> Iterator[None]:
        """``toggle_optimizer`` for the ``with`` block, ``untoggle_optimizer`` after it (also on an error)."""
        self.toggle_optimizer(optimizer)
        try:
            yield
        finally:
            self.untoggle_optimizer(optimizer)

    def manual_backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Backward with the precision's loss scaling and the strategy's gradient sync; runs the hooks."""
        fabric = self.__dict__.get("_fabric")
        if fabric is not None:  # run by Fabric
            fabric.backward(loss, *args, **kwargs)
            return
        self.trainer.stage_run.backward(loss, *args, **kwargs)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """``args``/``kwargs`` (e.g. ``retain_graph=True``) go on to ``Tensor.backward``."""
        fabric = self.__dict__.get("_fabric")
        if fabric is not None:  # run by Fabric
            fabric.backward(loss, *args, **kwargs)
            return
        calls.backward(self.trainer.strategy, loss, *args, **kwargs)

    def optimizer_step(
        self, epoch: int, batch_idx: int, optimizer: OptimizerHandle, optimizer_closure: Callable[[], Any] | None = None
    ) -> None:
        optimizer.step(closure=optimizer_closure)

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad()

    def lr_scheduler_step(self, scheduler: Any, metric: Any | None) -> None:
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric)

    @classmethod
    def load_from_checkpoint(
        cls, checkpoint_path: str | os.PathLike | IO[bytes], map_location: _MAP_LOCATION_TYPE = None,
        hparams_file: str | os.PathLike | None = None, strict: bool | None = None, weights_only: bool | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new module built from the checkpoint's saved hyperparameters (``kwargs`` override them) and weights.

        ``strict`` defaults to ``strict_loading``. The file is read as data; ``weights_only=False`` unpickles it in
        full, for a file you trust that holds your own objects (torch's and Lightning's opt-in).
        """
        # local import: `from trainer import Module` stays light (saving loads the checkpoint readers)
        from trainer.model.saving import load_from_checkpoint

        return load_from_checkpoint(cls, checkpoint_path, map_location, hparams_file, strict,
                                    weights_only=weights_only, **kwargs)

    def to_torchscript(
        self, file_path: str | os.PathLike | None = None, method: str | None = "script", example_inputs: Any = None,
        **kwargs: Any,
    ) -> torch.jit.ScriptModule:
        """This module as a TorchScript module (``torch.jit.script``, or ``torch.jit.trace`` with ``method="trace"``),
        saved to ``file_path`` when given. TorchScript is deprecated in PyTorch: prefer ``torch.export.export``."""
        from trainer.model.export import to_torchscript  # local import: export code loads when a module is exported

        return to_torchscript(self, file_path, method, example_inputs, **kwargs)

    def to_onnx(
        self, file_path: str | os.PathLike | io.BytesIO | None = None, input_sample: Any = None, **kwargs: Any
    ) -> ONNXProgram | None:
        """Export to ONNX (``torch.onnx.export``; ``kwargs`` go to it), tracing with ``input_sample`` or
        ``example_input_array``; needs the ``onnx``/``onnxscript`` packages."""
        from trainer.model.export import to_onnx  # local import: export code loads when a module is exported

        return to_onnx(self, file_path, input_sample, **kwargs)

    def freeze(self) -> Module:
        """No gradients and evaluation mode; returns the module (chainable, as Lightning's)."""
        for p in self.parameters():
            p.requires_grad = False
        return self.eval()

    def unfreeze(self) -> Module:
        """Gradients and training mode again; returns the module."""
        for p in self.parameters():
            p.requires_grad = True
        return self.train()

    # --- evaluation mode and batch transfer (defaults run unless overridden) ---------------------------
    def on_validation_model_zero_grad(self) -> None:
        """Before validation inside fit: free the gradients (Lightning does this by default)."""
        self.zero_grad()

    def on_validation_model_eval(self) -> None:
        self.trainer.model.eval()

    def on_validation_model_train(self) -> None:
        """Called only when overridden; otherwise every submodule's mode from before validation comes back."""
        self.trainer.model.train()

    def on_test_model_eval(self) -> None:
        self.trainer.model.eval()

    def on_test_model_train(self) -> None:
        self.trainer.model.train()

    def on_predict_model_eval(self) -> None:
        self.trainer.model.eval()

    # --- loaders: the Trainer asks a Module for them only where overridden (or assigned on the instance) ----
    def train_dataloader(self) -> TRAIN_DATALOADERS:
        raise _no_loader(self, "train_dataloader")

    def val_dataloader(self) -> EVAL_DATALOADERS:
        raise _no_loader(self, "val_dataloader")

    def test_dataloader(self) -> EVAL_DATALOADERS:
        raise _no_loader(self, "test_dataloader")

    def predict_dataloader(self) -> EVAL_DATALOADERS:
        raise _no_loader(self, "predict_dataloader")

    # --- hooks (no-ops; the Trainer calls only overridden ones) ---------------------------------------
    def prepare_data(self) -> None: ...
    def setup(self, stage: str) -> None: ...
    def teardown(self, stage: str) -> None: ...
    def on_fit_start(self) -> None: ...
    def on_fit_end(self) -> None: ...
    def on_train_start(self) -> None: ...
    def on_train_end(self) -> None: ...
    def on_validation_start(self) -> None: ...
    def on_validation_end(self) -> None: ...
    def on_test_start(self) -> None: ...
    def on_test_end(self) -> None: ...
    def on_predict_start(self) -> None: ...
    def on_predict_end(self) -> None: ...
    def on_train_epoch_start(self) -> None: ...
    def on_train_epoch_end(self) -> None: ...
    def on_validation_epoch_start(self) -> None: ...
    def on_validation_epoch_end(self) -> None: ...
    def on_test_epoch_start(self) -> None: ...
    def on_test_epoch_end(self) -> None: ...
    def on_predict_epoch_start(self) -> None: ...
    def on_predict_epoch_end(self) -> None: ...
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> int | None: ...
    def on_train_batch_end(self, outputs: STEP_OUTPUT, batch: Any, batch_idx: int) -> None: ...
    def on_validation_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_validation_batch_end(self, outputs: STEP_OUTPUT, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_test_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_test_batch_end(self, outputs: STEP_OUTPUT, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_predict_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_predict_batch_end(self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_before_backward(self, loss: torch.Tensor) -> None: ...
    def on_after_backward(self) -> None: ...
    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None: ...
    def on_before_zero_grad(self, optimizer: torch.optim.Optimizer) -> None: ...
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None: ...
    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None: ...


def _no_loader(module: Module, method: str) -> Exception:
    return LoaderNotImplementedError(
        f"{type(module).__name__}.{method} is not implemented: define {method}() in the Module or its DataModule, "
        "or pass the loaders to the Trainer call."
    )
