"""The Trainer: arguments, entry points (fit/validate/test/predict), metrics and checkpoint contents.

The loops live in ``trainer/loops/``; plugins are reached only through their small interfaces.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch

from plugins.checkpoint_io import trusted_loads
from plugins.layer_sync import layer_sync_from
from plugins.precision.base import Precision
from trainer.arguments.trainer_arguments import Plugin, TrainerArguments
from trainer.callbacks.base import Callback
from trainer.callbacks.setup import default_callbacks
from trainer.checkpointing.files import LAYOUT_KEYS
from trainer.datamodule import DataModule
from trainer.errors import MisconfigurationError
from trainer.arguments.limits import announce_batch_limits
from trainer.arguments.plugin_list import check_plugin_list, refuse_fsdp_without_gpu
from trainer.arguments.torch_switches import apply_torch_switches
from trainer.loggers.base import Logger
from trainer.loggers.setup import make_loggers
from trainer.loops.evaluation import print_results
from trainer.loops.evaluation_progress import PredictLoop
from trainer.loops.evaluation_progress import EvaluationLoop
from trainer.loops.fit import FitLoop
from trainer.loops.progress import LoopProgress
from trainer.stage.run import run_stage
from trainer.module import Module
from trainer.loops.nonfinite import refuse_nonfinite_save, stops_on_nonfinite_loss
from trainer.checkpointing.checkpoint_io import connect_checkpoint_io, without_checkpoint_io
from trainer.profilers.base import Profiler, resolve_profiler
from trainer.distributed.ranks import set_rank_zero_only
from trainer.metrics.results import to_float
from trainer.stage.stage_run import StageRun
from trainer.utilities.rank_zero import rank_zero_info, rank_zero_warn
from trainer.utilities.lazy import instances_of
from trainer.utilities.zero_edit import lightning_defaults
from trainer.states import RunningStage, TrainerState
from trainer.checkpointing.strategy_state import save_state
from trainer.trainer_properties import TrainerProperties

if TYPE_CHECKING:
    import inspect
    from collections.abc import Callable

    from plugins.transforms.activation_checkpointing import CheckpointSettings
    from plugins.transforms.compile import CompileSettings
    from trainer.callbacks.model_checkpoint import ModelCheckpoint
    from trainer.checkpointing.connector import CheckpointConnector
    from trainer.distributed.connector import AcceleratorConnector
    from trainer.callbacks.progress import ProgressBar
    from trainer.healing.spike import SpikeRecovery
    from trainer.model.optimizers import LRSchedulerConfig
    from trainer.planning.estimate import MemoryEstimate
    from trainer.planning.layout import Layout
    from trainer.utilities.types import EVAL_DATALOADERS, TRAIN_DATALOADERS

set_rank_zero_only()


class Trainer(TrainerProperties):
    """Runs a ``Module``'s loops on the hardware and strategy the plugin arguments pick.

    More of Lightning's members (placement, ``init_module``, the loaders in use...) are in ``trainer_properties.py``.
    """

    # The checked arguments stay one typed object, ``self.args`` (``TrainerArguments``), which the plan reads. These
    # are the ones Lightning code reads and changes on the Trainer itself (a callback sets ``accumulate_grad_batches``,
    # the tuner the limits), each stored under its own name with the argument's type; a test keeps this list equal
    # to the fields ``TrainerArguments`` stores (tests/trainer/test_trainer_args.py).
    args: TrainerArguments
    num_nodes: int
    fast_dev_run: int | bool
    max_time: float | None  # seconds, however it was given (checks.max_time)
    limit_train_batches: int | float | None
    limit_val_batches: int | float | None
    limit_test_batches: int | float | None
    limit_predict_batches: int | float | None
    val_check_interval: int | float | None  # a time interval is in seconds under _val_check_time_interval
    _val_check_time_interval: float | None
    check_val_every_n_epoch: int | None
    num_sanity_val_steps: int | None
    log_every_n_steps: int | None
    overfit_batches: int | float
    reload_dataloaders_every_n_epochs: int
    accumulate_grad_batches: int
    elastic_batch: str
    rank_batch_sizes: list[int] | str | None
    gradient_clip_val: float | None
    gradient_clip_algorithm: str | None
    deterministic: bool | str | None
    default_root_dir: str
    compile: CompileSettings | None  # from True or a dict of torch.compile arguments (plugins/transforms/compile.py)
    activation_checkpointing: CheckpointSettings | None  # from True, a mode name or a dict (plugins/transforms/)
    detect_anomaly: bool
    stop_on_nonfinite_loss: bool
    spike_recovery: bool | dict[str, object] | SpikeRecovery | None  # a dict: SpikeRecovery's arguments (trainer/healing/)
    preemption_signals: tuple[int, ...]
    auto_requeue: bool
    benchmark: bool | None
    inference_mode: bool
    use_distributed_sampler: bool
    sync_batchnorm: bool
    barebones: bool
    enable_autolog_hparams: bool

    def __init__(
        self, *, accelerator: Any = "auto", strategy: Any = "auto", devices: int | str | list[int] = "auto",
        num_nodes: int | str = 1, precision: int | str | Precision = "32-true",
        logger: Logger | Iterable[Logger] | bool | None = None,
        callbacks: Callback | list[Callback] | None = None, fast_dev_run: int | bool = False,
        max_epochs: int | None = None, min_epochs: int | None = None, max_steps: int = -1,
        min_steps: int | None = None, max_time: float | str | timedelta | dict[str, int] | None = None,
        limit_train_batches: int | float | None = None,
        limit_val_batches: int | float | None = None, limit_test_batches: int | float | None = None,
        limit_predict_batches: int | float | None = None,
        val_check_interval: int | float | str | timedelta | dict[str, int] | None = None,
        check_val_every_n_epoch: int | None = 1, num_sanity_val_steps: int | None = None,
        log_every_n_steps: int | None = None, enable_checkpointing: bool | None = None,
        enable_progress_bar: bool | None = None, enable_model_summary: bool | None = None,
        overfit_batches: int | float = 0.0, reload_dataloaders_every_n_epochs: int = 0,
        accumulate_grad_batches: int = 1, elastic_batch: str = "per_device",
        rank_batch_sizes: list[int] | str | None = None,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None, deterministic: bool | str | None = None,
        default_root_dir: str | os.PathLike | None = None,
        plugins: Plugin | list[Plugin] | None = None, compile: Any = None,
        activation_checkpointing: Any = None, detect_anomaly: bool = False,
        stop_on_nonfinite_loss: bool | None = None, spike_recovery: Any = None,
        preemption_signals: list[str | int] | bool | int | str | None = None,
        auto_requeue: bool = True,
        profiler: Profiler | str | None = None, benchmark: bool | None = None, inference_mode: bool = True,
        use_distributed_sampler: bool = True, sync_batchnorm: bool = False, barebones: bool = False,
        enable_autolog_hparams: bool = True, model_registry: str | None = None, **unknown: Any,
    ) -> None:
        """Every argument is declared, checked and documented in ``trainer/arguments/trainer_arguments.py`` (``TrainerArguments``)."""
        # every check: fails before any work (a checkpoint I/O plugin is taken apart: trainer/checkpointing/checkpoint_io.py)
        check_plugin_list(plugins, sync_batchnorm)
        self.args = args = TrainerArguments.from_call({**locals(), "plugins": without_checkpoint_io(plugins)})
        run = args.effective()
        announce_batch_limits(fast_dev_run, overfit_batches, limit_train_batches, limit_val_batches,
                              limit_test_batches, limit_predict_batches, val_check_interval)
        # local import: `from trainer import Trainer` loads no strategy plugin (tests/trainer/test_imports.py)
        from plugins.selection import resolve_plugins

        self.strategy = resolve_plugins(args.accelerator, args.devices, args.num_nodes, args.strategy, args.precision,
                                        environment=args.plugins)
        refuse_fsdp_without_gpu(args.strategy, self.strategy)
        connect_checkpoint_io(self, plugins)  # trainer/checkpointing/checkpoint_io.py
        set_rank_zero_only(self.strategy.global_rank)
        self.strategy.accumulate_grad_batches = args.accumulate_grad_batches
        vars(self).update(args.trainer_attributes(run))  # each stored argument under its own name
        self.num_nodes = self.strategy.num_nodes  # num_nodes="auto": what the launcher reported
        apply_torch_switches(args.deterministic, args.benchmark)
        self.layer_sync = layer_sync_from(plugins, args.sync_batchnorm)  # plugins=[TorchSyncBatchNorm()] too
        self.profiler = resolve_profiler(args.profiler)
        self.loggers = make_loggers(run["logger"], self.default_root_dir)
        self.callbacks: list[Callback] = default_callbacks(
            args.callbacks, run["enable_checkpointing"], run["enable_progress_bar"], run["enable_model_summary"],
            bool(self.fast_dev_run),
        )
        self.stop_on_nonfinite_loss = stops_on_nonfinite_loss(args.stop_on_nonfinite_loss, self.callbacks)
        self._add_healing(args)
        # max_epochs and min_epochs as given (None too) until a fit fills in their defaults: FitLoop.resolve_limits
        self._init_loop_state(run["max_epochs"] if self.fast_dev_run else args.max_epochs, args.min_epochs,
                              run["max_steps"], args.min_steps)
        if lightning_defaults():  # Lightning code: what Lightning's __init__ also does (fast_dev_run's logger, ...)
            # local import: Lightning code only
            from trainer.lightning_compat.impl.trainer_init import as_lightning_init

            as_lightning_init(self)

    def _add_healing(self, args: TrainerArguments) -> None:
        """``spike_recovery`` and ``rank_batch_sizes`` are callbacks of trainer/healing/, first in the list (they see
        a step before the others); only a run that asks loads the package."""
        if args.spike_recovery is not None and args.spike_recovery is not False:
            from trainer.healing.spike import spike_recovery_callback  # local import: only runs that ask load it

            self.callbacks.insert(0, spike_recovery_callback(args.spike_recovery))
        if args.rank_batch_sizes is not None:  # the loss weighting; the sampler: trainer/stage/plan.py
            from trainer.healing.rank_batches import RankBatches  # local import: only runs that ask load it

            self.callbacks.insert(0, RankBatches(args.rank_batch_sizes))

    def _init_loop_state(self, max_epochs: int | None, min_epochs: int | None, max_steps: int,
                         min_steps: int | None) -> None:
        """The loops' counters and stage live in one object (see trainer/loops/progress.py)."""
        self.progress = LoopProgress()
        self.fit_loop = FitLoop(self, max_epochs, min_epochs, max_steps, min_steps)
        self.predict_loop = PredictLoop(self)
        self.validate_loop = EvaluationLoop(self, "validate")  # Lightning's public members; loops/evaluation_progress.py
        self.test_loop = EvaluationLoop(self, "test")
        self.should_stop = False
        self.num_val_batches: list[int | float] = []
        self.num_test_batches: list[int | float] = []
        self.datamodule: DataModule | None = None
        self.ckpt_path: str | None = None
        self.stage_run = StageRun(self)  # the current (or last) call's state: trainer/stage/stage_run.py

    # --- public entry points -------------------------------------------------------------------------
    def fit(
        self,
        model: Module,
        train_dataloaders: TRAIN_DATALOADERS | DataModule | None = None,
        val_dataloaders: EVAL_DATALOADERS | None = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | os.PathLike | None = None,
        weights_only: bool | None = None,
    ) -> None:
        """Train ``model``; ``ckpt_path`` (or ``"last"``) continues exactly where that checkpoint stopped.

        The checkpoint is read as data; ``weights_only=False`` unpickles it in full, for a file you trust that holds
        your own objects (torch's and Lightning's opt-in)."""
        if isinstance(train_dataloaders, DataModule):
            train_dataloaders, datamodule = None, train_dataloaders
        with trusted_loads(weights_only):
            run_stage(self, "fit", model, datamodule, {"train": train_dataloaders, "val": val_dataloaders}, ckpt_path)

    def estimate(
        self,
        model: Module,
        train_dataloaders: TRAIN_DATALOADERS | DataModule | None = None,
        datamodule: DataModule | None = None,
        device_memory: int | str | None = None,
        layout: Layout | None = None,
    ) -> MemoryEstimate:
        """Per-rank memory of one training step in this Trainer's layout, from one run on fake tensors with the
        training loader's first batch; whether it fits ``device_memory`` (default: the accelerator's)."""
        from trainer.planning.trainer_plan import estimate_for_trainer  # local import: fake tensors only when asked

        if isinstance(train_dataloaders, DataModule):
            train_dataloaders, datamodule = None, train_dataloaders
        return estimate_for_trainer(self.strategy, model, train_dataloaders, datamodule, device_memory, layout,
                                    checkpointing=self.args.activation_checkpointing)

    def validate(
        self,
        model: Module | None = None,
        dataloaders: EVAL_DATALOADERS | DataModule | None = None,
        ckpt_path: str | os.PathLike | None = None,
        verbose: bool = True,
        datamodule: DataModule | None = None,
        weights_only: bool | None = None,
    ) -> list[dict[str, float]]:
        """Run ``validation_step`` over ``dataloaders`` (or the DataModule's ``val_dataloader``) without gradients;
        returns one dict of epoch metrics per loader and prints them when ``verbose``.

        No ``model``: the fitted one, with the weights of the best checkpoint its fit saved if there is one
        (Lightning's default, with its warning); ``ckpt_path`` (``"best"``, ``"last"`` or a path) loads those weights first, read as data unless
        ``weights_only=False``."""
        with trusted_loads(weights_only):
            return self._evaluate("validate", model, dataloaders, ckpt_path, verbose, datamodule)

    def test(
        self,
        model: Module | None = None,
        dataloaders: EVAL_DATALOADERS | DataModule | None = None,
        ckpt_path: str | os.PathLike | None = None,
        verbose: bool = True,
        datamodule: DataModule | None = None,
        weights_only: bool | None = None,
    ) -> list[dict[str, float]]:
        """Run ``test_step`` over ``dataloaders`` (or the DataModule's ``test_dataloader``) without gradients; returns
        one dict of epoch metrics per loader and prints them when ``verbose``. ``model``, ``ckpt_path`` and
        ``weights_only`` as for ``validate``."""
        with trusted_loads(weights_only):
            return self._evaluate("test", model, dataloaders, ckpt_path, verbose, datamodule)

    def predict(
        self,
        model: Module | None = None,
        dataloaders: EVAL_DATALOADERS | DataModule | None = None,
        datamodule: DataModule | None = None,
        return_predictions: bool | None = None,
        ckpt_path: str | os.PathLike | None = None,
        weights_only: bool | None = None,
    ) -> list[Any] | None:
        """Run ``predict_step`` over ``dataloaders`` (or the DataModule's ``predict_dataloader``) without gradients;
        returns the steps' outputs (a list per loader when there are several), or None with
        ``return_predictions=False``, which keeps nothing in memory (a ``BasePredictionWriter`` writes them instead).
        ``model``, ``ckpt_path`` and ``weights_only`` as for ``validate``."""
        if isinstance(dataloaders, DataModule):
            dataloaders, datamodule = None, dataloaders
        self.predict_loop.return_predictions = return_predictions is not False
        ckpt_path = self._previous_best("predict", model, ckpt_path)
        with trusted_loads(weights_only):
            out = run_stage(self, "predict", self._model_or_last(model), datamodule, {"predict": dataloaders},
                            ckpt_path)
        return out if return_predictions is not False else None

    def _evaluate(self, stage, model, dataloaders, ckpt_path, verbose, datamodule) -> list[dict[str, float]]:
        if isinstance(dataloaders, DataModule):
            dataloaders, datamodule = None, dataloaders
        key = "val" if stage == "validate" else "test"
        (self.validate_loop if stage == "validate" else self.test_loop).verbose = verbose
        ckpt_path = self._previous_best(stage, model, ckpt_path)
        results = run_stage(self, stage, self._model_or_last(model), datamodule, {key: dataloaders}, ckpt_path)
        if verbose and self.is_global_zero and results:
            print_results(stage, results)
        return results

    def _previous_best(self, fn: str, model: Module | None, ckpt_path: str | os.PathLike | None,
                       ) -> str | os.PathLike | None:
        """Lightning's default: evaluating the fitted model with no ``ckpt_path`` loads the best checkpoint the fit
        saved (with its warning); a model passed in, or no best checkpoint, is used as it is."""
        callback = self.checkpoint_callback
        if model is not None or ckpt_path is not None or not getattr(callback, "best_model_path", ""):
            return ckpt_path
        rank_zero_warn(f"`.{fn}(ckpt_path=None)` was called without a model. The best model of the previous `fit` call "
                       f"will be used. You can pass `.{fn}(ckpt_path='best')` to use the best model or "
                       f"`.{fn}(ckpt_path='last')` to use the last model. If you pass a value, this warning will be "
                       "silenced.")
        return "best"

    def _model_or_last(self, model: Module | None) -> Module:
        if model is None:
            if self.lightning_module is None:
                raise MisconfigurationError("No model given and none was fitted by this Trainer; pass model=...")
            return self.lightning_module
        return model

    # --- progress and state (read from the loops' one state object) ------------------------------------
    @property
    def state(self) -> TrainerState:
        return self.progress.state

    @property
    def state_fn(self) -> str | None:
        fn = self.progress.state.fn
        return None if fn is None else fn.value

    @property
    def current_epoch(self) -> int:
        return self.progress.epoch

    @current_epoch.setter
    def current_epoch(self, value: int) -> None:
        self.progress.epoch = value

    @property
    def global_step(self) -> int:
        return self.progress.global_step

    @global_step.setter
    def global_step(self, value: int) -> None:
        self.progress.global_step = value

    @property
    def is_last_batch(self) -> bool:
        return self.progress.is_last_batch

    @property
    def val_runs_at_epoch_end(self) -> bool:
        return self.progress.val_runs_at_epoch_end

    def _stage_flag(self, stage: RunningStage) -> bool:
        return self.progress.state.stage == stage

    def _set_stage_flag(self, stage: RunningStage, on: bool) -> None:
        if on:
            self.progress.state.stage = stage
        elif self.progress.state.stage == stage:
            self.progress.state.stage = None

    training = property(lambda self: self._stage_flag(RunningStage.TRAINING),
                        lambda self, on: self._set_stage_flag(RunningStage.TRAINING, on))
    sanity_checking = property(lambda self: self._stage_flag(RunningStage.SANITY_CHECKING),
                               lambda self, on: self._set_stage_flag(RunningStage.SANITY_CHECKING, on))
    validating = property(lambda self: self._stage_flag(RunningStage.VALIDATING),
                          lambda self, on: self._set_stage_flag(RunningStage.VALIDATING, on))
    testing = property(lambda self: self._stage_flag(RunningStage.TESTING),
                       lambda self, on: self._set_stage_flag(RunningStage.TESTING, on))
    predicting = property(lambda self: self._stage_flag(RunningStage.PREDICTING),
                          lambda self, on: self._set_stage_flag(RunningStage.PREDICTING, on))

    @property
    def max_epochs(self) -> int | None:
        return self.fit_loop.max_epochs

    @max_epochs.setter
    def max_epochs(self, value: int) -> None:
        self.fit_loop.max_epochs = value

    @property
    def min_epochs(self) -> int | None:
        return self.fit_loop.min_epochs

    @min_epochs.setter
    def min_epochs(self, value: int) -> None:
        self.fit_loop.min_epochs = value

    @property
    def max_steps(self) -> int:
        return self.fit_loop.max_steps

    @max_steps.setter
    def max_steps(self, value: int) -> None:
        self.fit_loop.max_steps = value

    @property
    def min_steps(self) -> int | None:
        return self.fit_loop.min_steps

    @min_steps.setter
    def min_steps(self, value: int) -> None:
        self.fit_loop.min_steps = value

    @property
    def num_training_batches(self) -> int | float:
        return self.fit_loop.max_batches

    @num_training_batches.setter
    def num_training_batches(self, value: int | float) -> None:
        self.fit_loop.max_batches = value

    @property
    def num_predict_batches(self) -> list[int | float]:
        return self.predict_loop.max_batches

    @num_predict_batches.setter
    def num_predict_batches(self, value: list[int | float]) -> None:
        self.predict_loop.max_batches = value

    @property
    def model(self) -> torch.nn.Module | None:
        """The module as the strategy set it up (cast, sharded), or the Module before a run."""
        return self.strategy.module if self.strategy.module is not None else self.lightning_module

    # the module and its optimizers are the strategy's (``trainer.strategy.lightning_module``), as in Lightning
    @property
    def lightning_module(self) -> Module | None:
        return self.strategy.lightning_module  # type: ignore[return-value]

    @lightning_module.setter
    def lightning_module(self, module: Module | None) -> None:
        self.strategy.lightning_module = module

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        return self.strategy.optimizers

    @optimizers.setter
    def optimizers(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.strategy.optimizers = optimizers

    @property
    def lr_scheduler_configs(self) -> list[LRSchedulerConfig]:
        return self.strategy.lr_scheduler_configs

    @lr_scheduler_configs.setter
    def lr_scheduler_configs(self, configs: list[LRSchedulerConfig]) -> None:
        self.strategy.lr_scheduler_configs = configs

    # Lightning's internals that code written for Lightning calls (MLflow's autolog, Optuna's pruning callback)
    @property
    def _accelerator_connector(self) -> AcceleratorConnector:
        from trainer.distributed.connector import AcceleratorConnector  # local import: only code that asks loads it

        return AcceleratorConnector(self)

    @property
    def _checkpoint_connector(self) -> CheckpointConnector:
        from trainer.checkpointing.connector import CheckpointConnector  # local import: only code that asks loads it

        return CheckpointConnector(self)

    # --- ranks ---------------------------------------------------------------------------------------
    @property
    def global_rank(self) -> int:
        return self.strategy.global_rank

    @property
    def local_rank(self) -> int:
        return self.strategy.local_rank

    @property
    def world_size(self) -> int:
        return self.strategy.world_size

    @property
    def is_global_zero(self) -> bool:
        return self.strategy.is_global_zero

    @property
    def accelerator(self) -> Any:
        return self.strategy.accelerator

    @property
    def precision_plugin(self) -> Any:
        return self.strategy.precision

    @property
    def precision(self) -> str:
        return self.strategy.precision.name

    # --- loggers and directories ---------------------------------------------------------------------
    @property
    def logger(self) -> Logger | None:
        return self.loggers[0] if self.loggers else None

    @property
    def loggers(self) -> list[Logger]:
        return self._loggers

    @loggers.setter
    def loggers(self, loggers: list[Logger] | None) -> None:
        self._loggers = loggers if loggers else []

    @logger.setter
    def logger(self, logger: Logger | None) -> None:
        """One logger in place of the ones there were (None: no logger), as Lightning's setter."""
        self.loggers = [] if logger is None else [logger]

    @property
    def log_dir(self) -> str:
        logger = self.logger
        path = getattr(logger, "log_dir", None) if logger is not None else None
        if path is None and logger is not None:
            path = logger.save_dir  # Lightning: a logger without its own log_dir (W&B, MLflow) gives its save_dir
        return str(path) if path is not None else self.default_root_dir

    # --- callbacks -----------------------------------------------------------------------------------
    @property
    def checkpoint_callbacks(self) -> list[ModelCheckpoint]:
        return instances_of(self.callbacks, "trainer.callbacks.model_checkpoint", "ModelCheckpoint")

    @property
    def checkpoint_callback(self) -> ModelCheckpoint | None:
        cbs = self.checkpoint_callbacks
        return cbs[0] if cbs else None

    @property
    def progress_bar_callback(self) -> ProgressBar | None:
        return next(iter(instances_of(self.callbacks, "trainer.callbacks.progress", "ProgressBar")), None)

    # --- metrics ---------------------------------------------------------------------------------------
    @property
    def callback_metrics(self) -> dict[str, Any]:
        """Everything logged (step values, epoch aggregates), for callbacks such as ModelCheckpoint. Writable, as
        Lightning's: what a callback puts in (``LearningRateMonitor``'s rates) stays for later readers
        (``EarlyStopping`` on a learning rate) until a logged value of that name replaces it."""
        written = self.stage_run.written_callback_metrics
        out = _WritableMetrics(written)
        dict.update(out, written)
        for results in self.stage_run.results.values():
            dict.update(out, results.callback_view())
        return out

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        """What the progress bar shows: the latest value of every key logged with ``prog_bar=True`` in this call
        (an epoch's aggregate stays until the next one, as in Lightning)."""
        shown = self.stage_run.progress_bar_shown
        for results in self.stage_run.results.values():
            shown.update((k, to_float(v)) for k, v in results.progress_bar_view().items())
        return dict(shown)

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        """The latest value of every key for the loggers in this Trainer call (as Lightning: step values too
        when ``log_every_n_steps`` has not sent them yet; tensors, as Lightning's); read lazily, so logging costs
        no sync per step."""
        out = dict(self.stage_run.logged_metrics)
        for results in self.stage_run.results.values():
            out.update(results.latest_steps_for_logger())
        return out

    @property
    def estimated_stepping_batches(self) -> int | float:
        """Optimizer steps the fit will take, from max_steps, max_epochs and the loader length. Asked for during a fit
        before the training loader is (from ``configure_optimizers``), it asks for the loader, as Lightning does."""
        if self.max_epochs in (None, -1):  # no epoch limit (None: not resolved yet, outside a fit)
            return math.inf if self.max_steps == -1 else self.max_steps
        if self.train_dataloader is None:
            rank_zero_info("Loading `train_dataloader` to estimate number of stepping batches.")
            self.fit_loop.setup_data()
        if self.num_training_batches == math.inf:  # an iterable dataset
            return self.max_steps
        per_epoch = math.ceil(self.num_training_batches / self.accumulate_grad_batches)
        by_epochs = per_epoch * max(self.max_epochs, 1)
        return min(by_epochs, self.max_steps) if self.max_steps != -1 else by_epochs

    # --- checkpoints -----------------------------------------------------------------------------------
    def save_checkpoint(self, filepath: str | os.PathLike, weights_only: bool | None = None,
                        storage_options: Any = None) -> None:
        """Collect the full training state and write it atomically; all ranks call.

        The strategy decides the format: one file from rank 0, or (sharded strategies) a directory of shards.
        """
        # local import: what a checkpoint holds, and how, loads with the first save (a plain fit saves none)
        from trainer.checkpointing.contents import collect_checkpoint
        from trainer.checkpointing.weights_only import check_storage_options

        check_storage_options(storage_options)
        if self.lightning_module is None:  # Lightning's error and words
            raise AttributeError("Saving a checkpoint is only possible if a model is attached to the Trainer. Did you "
                                 "call `Trainer.save_checkpoint()` before calling `Trainer.{fit,validate,test,predict}`?")
        if refuse_nonfinite_save(self, filepath):
            return
        checkpoint = collect_checkpoint(self, bool(weights_only))
        save_state(self.strategy, filepath, checkpoint, LAYOUT_KEYS)  # the call Fabric.save makes

    def __repr__(self) -> str:
        return f"Trainer(strategy={self.strategy!r}, max_epochs={self.max_epochs}, max_steps={self.max_steps})"


def _declared_signature(init: Callable[..., None]) -> inspect.Signature:
    """``Trainer.__init__``'s signature without its ``**unknown`` catch-all, which exists only to word the error for a
    misspelt argument: tools that read the signature (LightningCLI's ``--trainer.*`` options, help) see the arguments
    a Trainer takes."""
    import inspect

    signature = inspect.signature(init)
    return signature.replace(parameters=[p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD])


def _environment_defaults(init: Callable[..., None]) -> Callable[..., None]:
    """In the zero-edit mode, ``PL_TRAINER_<ARGUMENT>`` environment variables set defaults (Lightning's
    ``Trainer``; ``PL_TRAINER_LOGGER=False``, ``PL_TRAINER_MAX_STEPS=7``); arguments passed win."""
    import functools

    @functools.wraps(init)
    def __init__(self: Trainer, **kwargs: object) -> None:
        if lightning_defaults() and any(name.startswith("PL_") for name in os.environ):
            from trainer.lightning_compat.impl.utils_extras import _parse_env_variables  # local import: Lightning code only

            kwargs = {**vars(_parse_env_variables(type(self))), **kwargs}
        init(self, **kwargs)

    return __init__


Trainer.__init__ = _environment_defaults(Trainer.__init__)  # type: ignore[method-assign]
Trainer.__init__.__signature__ = _declared_signature(Trainer.__init__)  # type: ignore[attr-defined]


class _WritableMetrics(dict):
    """``trainer.callback_metrics``: a fresh view of the logged metrics whose writes are kept for the call."""

    def __init__(self, store: dict[str, object]) -> None:
        super().__init__()
        self._store = store

    def __setitem__(self, key: str, value: object) -> None:
        super().__setitem__(key, value)
        self._store[key] = value

    def update(self, *args: Any, **kwargs: Any) -> None:
        new = dict(*args, **kwargs)
        super().update(new)
        self._store.update(new)

    def __reduce__(self) -> tuple[type[dict], tuple[dict[str, object]]]:
        """Pickled or copied, a plain dict of the values (what Lightning's ``callback_metrics`` is)."""
        return dict, (dict(self),)
