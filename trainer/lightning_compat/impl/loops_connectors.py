"""Lightning's Trainer connectors and configuration checks (``lightning.pytorch.trainer.connectors.*``,
``lightning.pytorch.trainer.configuration_validator``).

Rule 1 of ``impl/loops_progress.py``'s docstring (Relay's own code, Lightning's signature and behaviour):
``_set_torch_flags``, ``_validate_callbacks_list``, the signal connector's handler registration and its helpers,
``_FxValidator`` (in which hooks ``self.log`` may log, and with which ``on_step``/``on_epoch`` defaults), the
logging result's ``_Sync``/``_Metadata``, and the configuration checks.

``_AcceleratorConnector`` built on its own resolves its arguments as the Trainer does and shows the result as
Lightning's does (the Trainer's view of it: ``trainer/distributed/connector.py``).

Rule 3: ``_CallbackConnector``, ``_LoggerConnector``, ``_CheckpointConnector``,
``_DataConnector``, ``_ResultCollection`` and ``_ResultMetric`` are Lightning's Trainer internals; Relay's Trainer is
not built from connectors (``trainer/stage/plan.py`` resolves the plugins, ``trainer/stage/hooks.py`` the callbacks,
``trainer/metrics/results.py`` holds logged values, ``trainer/checkpointing`` saves and resumes). They import, and
building one raises an error saying where Relay does that.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict, Union

import torch

from plugins.layer_sync import TorchSyncBatchNorm
from trainer.callbacks.base import Callback
from trainer.callbacks.setup import check_unique_state_keys
from trainer.distributed.connector import AcceleratorConnector
from trainer.lightning_compat.impl.misc import is_param_in_hook_signature
from trainer.stage.loop_checks import verify_evaluation, verify_fit, verify_manual_optimization
from trainer.states import TrainerFn
from trainer.utilities.exceptions import MisconfigurationException
from trainer.utilities.model_helpers import is_overridden
from trainer.utilities.rank_zero import rank_zero_deprecation, rank_zero_warn
from trainer.utilities.warnings import PossibleUserWarning

if TYPE_CHECKING:
    from types import FrameType

    from trainer.module import Module as LightningModule
    from trainer.trainer import Trainer

    _SIGNUM = Union[int, signal.Signals]
    _HANDLER = Union[Callable[[_SIGNUM, FrameType], Any], int, signal.Handlers, None]

log = logging.getLogger(__name__)
_IS_WINDOWS = sys.platform == "win32"


# --- accelerator_connector --------------------------------------------------------------------------------

def _set_torch_flags(*, deterministic: bool | str | None = None, benchmark: bool | None = None) -> None:
    """Apply ``Trainer(deterministic=..., benchmark=...)`` to torch: deterministic algorithms (``"warn"``: warn only),
    cuDNN benchmark (off by default when deterministic) and cuBLAS's workspace setting for determinism."""
    if deterministic and benchmark is None:
        benchmark = False
    elif deterministic and benchmark:
        rank_zero_warn("You passed `deterministic=True` and `benchmark=True`. Note that PyTorch ignores "
                       "torch.backends.cudnn.deterministic=True when torch.backends.cudnn.benchmark=True.")
    if benchmark is not None:
        torch.backends.cudnn.benchmark = benchmark
    if deterministic == "warn":
        torch.use_deterministic_algorithms(True, warn_only=True)
    elif isinstance(deterministic, bool):
        torch.use_deterministic_algorithms(deterministic)
    if deterministic:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"


# --- callback_connector -----------------------------------------------------------------------------------

def _validate_callbacks_list(callbacks: list[Callback]) -> None:
    """Two callbacks with state may not share a ``state_key`` (their checkpoint entries would collide)."""
    check_unique_state_keys(callbacks)


# --- signal_connector -------------------------------------------------------------------------------------

class _HandlersCompose:
    """Several signal handlers called in order as one (an ``int`` handler such as ``SIG_IGN`` is skipped)."""

    def __init__(self, signal_handlers: Union[list[_HANDLER], _HANDLER]) -> None:
        self.signal_handlers = signal_handlers if isinstance(signal_handlers, list) else [signal_handlers]

    def __call__(self, signum: int, frame: FrameType) -> None:
        for handler in self.signal_handlers:
            if isinstance(handler, int):
                handler = signal.getsignal(handler)
            if callable(handler):
                handler(signum, frame)


def _get_sigkill_signal() -> int:
    return signal.SIGTERM if _IS_WINDOWS else signal.SIGKILL


class _SignalConnector:
    """Notes a SIGTERM (``received_sigterm``), passes it to the launched workers, and restores the previous handlers
    in ``teardown``. Relay's Trainer handles preemption itself (``trainer/checkpointing/preemption.py``: SIGTERM and
    SIGUSR1 save a checkpoint and exit); SLURM requeueing is the cluster's there, not this object's."""

    def __init__(self, trainer: Trainer) -> None:
        self.received_sigterm = False
        self.trainer = trainer
        self._original_handlers: dict[_SIGNUM, _HANDLER] = {}

    def register_signal_handlers(self) -> None:
        self.received_sigterm = False
        self._original_handlers = self._get_current_signal_handlers()
        if _IS_WINDOWS:
            return
        handlers: list[_HANDLER] = [self._sigterm_notifier_fn]
        if self._has_already_handler(signal.SIGTERM):
            handlers.append(signal.getsignal(signal.SIGTERM))
        self._register_signal(signal.SIGTERM, _HandlersCompose(handlers))

    def _sigterm_notifier_fn(self, signum: int, _: FrameType) -> None:
        log.info(f"Received SIGTERM: {signum}")
        if not self.received_sigterm:
            launcher = getattr(getattr(self.trainer, "strategy", None), "launcher", None)
            if launcher is not None and hasattr(launcher, "kill"):
                launcher.kill(signum)
        self.received_sigterm = True

    def _sigterm_handler_fn(self, signum: int, _: FrameType) -> None:
        log.info(f"Bypassing SIGTERM: {signum}")

    def teardown(self) -> None:
        for signum, handler in self._original_handlers.items():
            if handler is not None:
                self._register_signal(signum, handler)
        self._original_handlers = {}

    @staticmethod
    def _get_current_signal_handlers() -> dict[_SIGNUM, _HANDLER]:
        valid = _SignalConnector._valid_signals()
        if not _IS_WINDOWS:
            valid -= {signal.SIGKILL, signal.SIGSTOP}
        return {signum: signal.getsignal(signum) for signum in valid}

    @staticmethod
    def _valid_signals() -> set[signal.Signals]:
        return signal.valid_signals()

    @staticmethod
    def _has_already_handler(signum: int) -> bool:
        return signal.getsignal(signum) not in (None, signal.SIG_DFL)

    @staticmethod
    def _register_signal(signum: int, handlers: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signum, handlers)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_original_handlers": {}}


# --- logger_connector.fx_validator ------------------------------------------------------------------------

class _LogOptions(TypedDict):
    allowed_on_step: tuple[bool] | tuple[bool, bool]
    allowed_on_epoch: tuple[bool] | tuple[bool, bool]
    default_on_step: bool
    default_on_epoch: bool


def _options(on_step: tuple, on_epoch: tuple, default_step: bool, default_epoch: bool) -> _LogOptions:
    return _LogOptions(allowed_on_step=on_step, allowed_on_epoch=on_epoch, default_on_step=default_step,
                       default_on_epoch=default_epoch)


_EITHER = (False, True)
_TRAIN_STEP = ("on_before_backward", "backward", "on_after_backward", "on_before_optimizer_step", "optimizer_step",
               "configure_gradient_clipping", "clip_gradients", "on_before_zero_grad", "optimizer_zero_grad",
               "on_train_batch_start", "on_train_batch_end", "training_step")
_EVAL_STEP = ("on_validation_batch_start", "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end",
              "validation_step", "test_step")
_EPOCH_ONLY = ("on_train_start", "on_validation_start", "on_test_start", "on_train_epoch_start", "on_train_epoch_end",
               "on_validation_epoch_start", "on_validation_epoch_end", "on_test_epoch_start", "on_test_epoch_end")
_NO_LOGGING = ("lr_scheduler_step", "on_fit_start", "on_fit_end", "on_sanity_check_start", "on_sanity_check_end",
               "on_train_end", "on_validation_end", "on_test_end", "on_predict_start", "on_predict_end",
               "on_predict_epoch_start", "on_predict_epoch_end", "on_before_batch_transfer", "transfer_batch_to_device",
               "on_after_batch_transfer", "on_predict_batch_start", "on_predict_batch_end", "on_exception",
               "state_dict", "on_save_checkpoint", "on_load_checkpoint", "load_state_dict", "setup", "teardown",
               "configure_sharded_model", "configure_model", "predict_step", "configure_optimizers",
               "train_dataloader", "val_dataloader", "test_dataloader", "prepare_data", "configure_callbacks",
               "on_validation_model_zero_grad", "on_validation_model_eval", "on_test_model_eval",
               "on_validation_model_train", "on_test_model_train")


class _FxValidator:
    """Where ``self.log`` may be called, which ``on_step``/``on_epoch`` values each hook allows, and its defaults."""

    _LogOptions = _LogOptions
    functions: dict[str, _LogOptions | None] = {
        **{fx: _options(_EITHER, _EITHER, True, False) for fx in _TRAIN_STEP},
        **{fx: _options(_EITHER, _EITHER, False, True) for fx in _EVAL_STEP},
        **{fx: _options((False,), (True,), False, True) for fx in _EPOCH_ONLY},
        **{fx: None for fx in _NO_LOGGING},
    }

    @classmethod
    def check_logging(cls, fx_name: str) -> None:
        if fx_name not in cls.functions:
            raise RuntimeError(f"Logging inside `{fx_name}` is not implemented. Please, open an issue in "
                               "`https://github.com/Lightning-AI/pytorch-lightning/issues`.")
        if cls.functions[fx_name] is None:
            raise MisconfigurationException(f"You can't `self.log()` inside `{fx_name}`. HINT: You can still log "
                                            "directly to the logger by using `self.logger.experiment`.")

    @classmethod
    def _config(cls, fx_name: str) -> _LogOptions:
        config = cls.functions[fx_name]
        if config is None:
            raise MisconfigurationException(f"You can't `self.log()` inside `{fx_name}`.")
        return config

    @classmethod
    def get_default_logging_levels(cls, fx_name: str, on_step: bool | None, on_epoch: bool | None) -> tuple[bool, bool]:
        config = cls._config(fx_name)
        return (config["default_on_step"] if on_step is None else on_step,
                config["default_on_epoch"] if on_epoch is None else on_epoch)

    @classmethod
    def check_logging_levels(cls, fx_name: str, on_step: bool, on_epoch: bool) -> None:
        config = cls._config(fx_name)
        for name, value in (("on_step", on_step), ("on_epoch", on_epoch)):
            allowed = config[f"allowed_{name}"]  # type: ignore[literal-required]
            if value not in allowed:
                raise MisconfigurationException(
                    f"You can't `self.log({name}={value})` inside `{fx_name}`, must be one of {allowed}.")

    @classmethod
    def check_logging_and_get_default_levels(cls, fx_name: str, on_step: bool | None,
                                             on_epoch: bool | None) -> tuple[bool, bool]:
        cls.check_logging(fx_name)
        on_step, on_epoch = cls.get_default_logging_levels(fx_name, on_step, on_epoch)
        cls.check_logging_levels(fx_name, on_step, on_epoch)
        return on_step, on_epoch


# --- logger_connector.result ------------------------------------------------------------------------------

class _METRICS(TypedDict):
    """The three metric dicts a result collection produces: for callbacks, for loggers, for the progress bar."""

    callback: dict[str, torch.Tensor]
    log: dict[str, torch.Tensor]
    pbar: dict[str, float]


@dataclass
class _Sync:
    """How a logged value is reduced over ranks: ``fn(value, reduce_op=op, group=group)`` when ``should`` (and not
    ``rank_zero_only``), else the value unchanged. Calling the object calls the chosen function."""

    fn: Callable | None = None
    _should: bool = False
    rank_zero_only: bool = False
    _op: str | None = None
    _group: Any | None = None

    def __post_init__(self) -> None:
        self._generate_sync_fn()

    def _generate_sync_fn(self) -> None:
        chosen = self.fn if self.fn is not None and self._should and not self.rank_zero_only else self.no_op
        self._fn: Callable = partial(chosen, reduce_op=self._op, group=self._group)

    @property
    def should(self) -> bool:
        return self._should

    @should.setter
    def should(self, should: bool) -> None:
        self._should = should
        self._generate_sync_fn()

    @property
    def op(self) -> str | None:
        return self._op

    @op.setter
    def op(self, op: str | None) -> None:
        self._op = op
        self._generate_sync_fn()

    @property
    def group(self) -> Any | None:
        return self._group

    @group.setter
    def group(self, group: Any | None) -> None:
        self._group = group
        self._generate_sync_fn()

    @property
    def __call__(self) -> Any:  # the instance is called as its chosen function
        return self._fn

    @staticmethod
    def no_op(value: Any, *_: Any, **__: Any) -> Any:
        return value


_REDUCTIONS = {"min": torch.min, "max": torch.max, "mean": torch.mean, "avg": torch.mean, "sum": torch.sum}


@dataclass
class _Metadata:
    """What ``self.log`` was told about one value: hook, name, where it goes, how it reduces and syncs."""

    fx: str
    name: str
    prog_bar: bool = False
    logger: bool = True
    on_step: bool = False
    on_epoch: bool = True
    reduce_fx: Callable = torch.mean
    enable_graph: bool = False
    add_dataloader_idx: bool = True
    dataloader_idx: int | None = None
    metric_attribute: str | None = None
    _sync: _Sync | None = None

    def __post_init__(self) -> None:
        if not self.on_step and not self.on_epoch:
            raise MisconfigurationException("`self.log(on_step=False, on_epoch=False)` is not useful.")
        error = ("Only `self.log(..., reduce_fx={min,max,mean,sum})` are supported. If you need a custom reduction, "
                 f"please log a `torchmetrics.Metric` instance instead. Found: {self.reduce_fx}")
        if isinstance(self.reduce_fx, str):
            if self.reduce_fx.lower() not in _REDUCTIONS:
                raise MisconfigurationException(error)
            self.reduce_fx = _REDUCTIONS[self.reduce_fx.lower()]
        elif self.is_custom_reduction:
            raise MisconfigurationException(error)

    @property
    def sync(self) -> _Sync:
        if self._sync is None:
            raise AttributeError("sync was not set")
        return self._sync

    @sync.setter
    def sync(self, sync: _Sync) -> None:
        if sync.op is None:
            sync.op = self.reduce_fx.__name__
        self._sync = sync

    @property
    def forked(self) -> bool:
        return self.on_step and self.on_epoch

    def forked_name(self, on_step: bool) -> str:
        return f"{self.name}_{'step' if on_step else 'epoch'}" if self.forked else self.name

    @property
    def is_mean_reduction(self) -> bool:
        return self.reduce_fx is torch.mean

    @property
    def is_sum_reduction(self) -> bool:
        return self.reduce_fx in (torch.sum, sum)

    @property
    def is_max_reduction(self) -> bool:
        return self.reduce_fx in (torch.max, max)

    @property
    def is_min_reduction(self) -> bool:
        return self.reduce_fx in (torch.min, min)

    @property
    def is_custom_reduction(self) -> bool:
        return not (self.is_mean_reduction or self.is_max_reduction or self.is_min_reduction or self.is_sum_reduction)


# --- Lightning's Trainer internals Relay is not built from (rule 3) ----------------------------------------

class _NotRelays:
    """Importable; building one says what Relay does instead."""

    _instead = ""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} is Lightning's Trainer internal; Relay's Trainer is not built from it: "
            f"{self._instead} Use the Trainer's public arguments and properties instead.")


class _AcceleratorConnector(AcceleratorConnector):
    """Built on its own, as projects build it to learn what an ``accelerator``/``devices`` pair resolves to
    (scvi-tools reads ``_accelerator_flag`` and ``_devices_flag``): the Trainer's placement arguments resolved by
    Relay's one resolution (``plugins/selection.py``), read through the Trainer's view of its connector."""

    def __init__(self, devices: list[int] | str | int = "auto", num_nodes: int = 1, accelerator: Any = "auto",
                 strategy: Any = "auto", plugins: Any = None, precision: Any = None, sync_batchnorm: bool = False,
                 benchmark: bool | None = None, use_distributed_sampler: bool = True,
                 deterministic: bool | str | None = None) -> None:
        # local import: resolved only when a project builds the connector itself, as the Trainer resolves them
        from plugins.selection import resolve_plugins
        from trainer.arguments.checks import environment
        from trainer.checkpointing.checkpoint_io import without_checkpoint_io

        self._use_distributed_sampler = use_distributed_sampler
        _set_torch_flags(deterministic=deterministic, benchmark=benchmark)
        if not isinstance(num_nodes, int) or num_nodes < 1:
            raise ValueError(f"`num_nodes` must be a positive integer, but got {num_nodes}.")
        if devices in ([], 0, "0"):
            name = type(accelerator).__qualname__ if not isinstance(accelerator, str) else accelerator
            raise MisconfigurationException(f"`Trainer(devices={devices!r})` value is not a valid input using "
                                            f"{name} accelerator.")
        self._accelerator = accelerator
        self._strategy = resolve_plugins(accelerator, devices, num_nodes, strategy,
                                         "32-true" if precision is None else precision,
                                         environment=environment("plugins", without_checkpoint_io(plugins)))
        self._layer_sync = TorchSyncBatchNorm() if sync_batchnorm else None

    @property
    def strategy(self) -> Any:
        return self._strategy

    @property
    def use_distributed_sampler(self) -> bool:
        return self._use_distributed_sampler

    @property
    def _requested_accelerator(self) -> Any:
        return self._accelerator


class _CallbackConnector(_NotRelays):
    _instead = "Relay orders and calls the callbacks itself (trainer/stage/hooks.py; read trainer.callbacks)."


class _LoggerConnector(_NotRelays):
    _instead = ("Relay keeps logged values in trainer/metrics/results.py (read trainer.callback_metrics, "
                "trainer.logged_metrics, trainer.progress_bar_metrics).")


class _CheckpointConnector(_NotRelays):
    _instead = "Relay saves and restores checkpoints in trainer/checkpointing (trainer.save_checkpoint, fit(ckpt_path=...))."


class _DataConnector(_NotRelays):
    _instead = "Relay finds and prepares its loaders in trainer/data/loaders.py (read trainer.train_dataloader & co.)."


class _ResultCollection(_NotRelays):
    _instead = "Relay's logged values live in trainer/metrics/results.py (Results), reduced as Lightning reduces them."


class _ResultMetric(_NotRelays):
    _instead = "Relay's logged values live in trainer/metrics/results.py (Results), reduced as Lightning reduces them."


# --- configuration_validator ------------------------------------------------------------------------------

def __verify_train_val_loop_configuration(trainer: Trainer, model: LightningModule) -> None:
    """``fit`` needs ``training_step`` and ``configure_optimizers``; warns about validation without a step or loader;
    the 1.x ``*_epoch_end`` hooks are refused (the Trainer's own check: trainer/stage/loop_checks.py)."""
    verify_fit(model, bool(getattr(trainer.fit_loop, "val_source", False)))


def __verify_eval_loop_configuration(model: LightningModule, stage: str) -> None:
    """``validate``/``test`` need their step; ``predict`` a ``predict_step`` or ``forward``."""
    verify_evaluation(model, {"val": "validate"}.get(stage, stage))


def __verify_manual_optimization_support(trainer: Trainer, model: LightningModule) -> None:
    verify_manual_optimization(trainer, model)


def __warn_dataloader_iter_limitations(model: LightningModule) -> None:

    steps = (model.training_step, model.validation_step, model.predict_step, model.test_step)
    if any(is_param_in_hook_signature(fn, "dataloader_iter", explicit=True) for fn in steps if fn is not None):
        rank_zero_warn(
            "You are using the `dataloader_iter` step flavor. If you consume the iterator more than once per step, the "
            "`batch_idx` argument in any hook that takes it will not match with the batch index of the last batch "
            "consumed. This might have unforeseen effects on callbacks or code that expects to get the correct index. "
            "This will also not work well with gradient accumulation. This feature is very experimental and subject to "
            "change. Here be dragons.", category=PossibleUserWarning)


def __verify_configure_model_configuration(model: LightningModule) -> None:
    if not is_overridden("configure_sharded_model", model):
        return
    name = type(model).__name__
    if is_overridden("configure_model", model):
        raise RuntimeError(f"Both `{name}.configure_model`, and `{name}.configure_sharded_model` are overridden. The "
                           "latter is deprecated and it should be replaced with the former.")
    rank_zero_deprecation(
        f"You have overridden `{name}.configure_sharded_model` which is deprecated. Please override the "
        "`configure_model` hook instead. Instantiation with the newer hook will be created on the device right away "
        "and have the right data type depending on the precision setting in the Trainer.")


def _verify_loop_configurations(trainer: Any) -> None:
    """The checks above for the Trainer call running now (``trainer.state.fn``)."""
    model = trainer.lightning_module
    fn = trainer.state.fn
    if fn is None:
        raise ValueError("Unexpected: Trainer state fn must be set before validating loop configuration.")
    if fn == TrainerFn.FITTING:
        __verify_train_val_loop_configuration(trainer, model)
        __verify_manual_optimization_support(trainer, model)
    else:
        __verify_eval_loop_configuration(model, {TrainerFn.VALIDATING: "val", TrainerFn.TESTING: "test",
                                                 TrainerFn.PREDICTING: "predict"}[fn])
    __verify_configure_model_configuration(model)
    __warn_dataloader_iter_limitations(model)
