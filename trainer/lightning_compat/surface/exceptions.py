"""The allowed exceptions to "every Lightning module, name and public signature is served": each with its reason
and the test that checks what it says. ``docs/lightning_api.md`` lists them (``docs/make_lightning_api.py``);
``tests/compat/test_lightning_surface.py`` fails on a finding no exception covers, and on an exception that
covers nothing any more.

A pattern is ``fnmatch``-ed against ``module:name`` (names), ``module:name`` or ``module:Class.method``
(signatures), with the module under ``lightning.*``.
"""

from __future__ import annotations

from dataclasses import dataclass

TESTS = "tests/compat/test_lightning_surface.py"


@dataclass(frozen=True)
class Allowed:
    patterns: tuple[str, ...]
    what: str  # "names" or "signatures"
    reason: str
    test: str

    def covers(self, key: str) -> bool:
        from fnmatch import fnmatchcase

        return any(fnmatchcase(key, p) for p in self.patterns)


NOT_SERVED = f"{TESTS}::test_names_not_served_fail_when_used_naming_themselves"
RAISES_ON_USE = "tests/compat/test_lightning_names_fabric.py::test_engine_internals_import_and_raise_naming_themselves"
LISTED = f"{TESTS}::test_every_finding_is_an_allowed_exception_and_every_exception_still_holds"

# public signatures that differ today, each by name: a new difference is a finding, not covered here
NOT_ALIGNED = (
    "lightning.fabric.fabric:Fabric.launch",
    "lightning.fabric.fabric:Fabric.load_raw",
    "lightning.fabric.fabric:Fabric.run",
    "lightning.fabric.fabric:Fabric.setup",
    "lightning.fabric.fabric:Fabric.sharded_model",
    "lightning.fabric.utilities.types:Steppable.step",
    "lightning.pytorch.callbacks.early_stopping:EarlyStopping",
    "lightning.pytorch.callbacks.lambda_function:LambdaCallback",
    "lightning.pytorch.callbacks.model_checkpoint:ModelCheckpoint",
    "lightning.pytorch.callbacks.model_checkpoint:ModelCheckpoint.check_monitor_top_k",
    "lightning.pytorch.callbacks.model_checkpoint:ModelCheckpoint.file_exists",
    "lightning.pytorch.callbacks.model_checkpoint:ModelCheckpoint.format_checkpoint_name",
    "lightning.pytorch.callbacks.model_checkpoint:ModelCheckpoint.to_yaml",
    "lightning.pytorch.callbacks.model_summary:ModelSummary.summarize",
    "lightning.pytorch.callbacks.progress.rich_progress:RichProgressBar",
    "lightning.pytorch.callbacks.progress.rich_progress:RichProgressBar.configure_columns",
    "lightning.pytorch.callbacks.progress.rich_progress:RichProgressBar.refresh",
    "lightning.pytorch.callbacks.progress.tqdm_progress:TQDMProgressBar.init_predict_tqdm",
    "lightning.pytorch.callbacks.progress.tqdm_progress:TQDMProgressBar.init_sanity_tqdm",
    "lightning.pytorch.callbacks.progress.tqdm_progress:TQDMProgressBar.init_test_tqdm",
    "lightning.pytorch.callbacks.progress.tqdm_progress:TQDMProgressBar.init_train_tqdm",
    "lightning.pytorch.callbacks.progress.tqdm_progress:TQDMProgressBar.init_validation_tqdm",
    "lightning.pytorch.callbacks.rich_model_summary:RichModelSummary.summarize",
    "lightning.pytorch.cli:LightningArgumentParser",
    "lightning.pytorch.cli:LightningArgumentParser.add_lr_scheduler_args",
    "lightning.pytorch.cli:LightningCLI",
    "lightning.pytorch.core.mixins.hparams_mixin:HyperparametersMixin.save_hyperparameters",
    "lightning.pytorch.core.module:LightningModule.to_tensorrt",
    "lightning.pytorch.core.optimizer:LightningOptimizer.toggle_model",
    "lightning.pytorch.demos.transformer:Transformer.generate_square_subsequent_mask",
    "lightning.pytorch.demos.transformer:WikiText2.download",
    "lightning.pytorch.profilers.advanced:AdvancedProfiler",
    "lightning.pytorch.profilers.pytorch:PyTorchProfiler",
    "lightning.pytorch.trainer.trainer:Trainer",
    "lightning.pytorch.utilities.types:DistributedDataParallel",
)

ALLOWED: list[Allowed] = [
    Allowed(("lightning.pytorch.loops*:*",
             "lightning.pytorch.trainer.connectors.*:*",
             "lightning.pytorch.overrides.*:*",
             "lightning.pytorch.utilities.migration*:*", "lightning.pytorch.utilities.upgrade_checkpoint:*",
             "lightning.pytorch._graveyard._torchmetrics:*",
             "lightning.pytorch.core.module:_*",
             "*:pl_legacy_patch"), "names",
            "Lightning's engine: its loop objects, connectors, hook dispatch, configuration checks, "
            "old-checkpoint migration and its patch of torchmetrics < 0.8. Relay's engine is its own (same hooks, same order, checked differentially); "
            "code that subclasses or patches these objects does not run on Relay", NOT_SERVED),
    Allowed(("lightning.pytorch.loggers.litlogger:*", "*:download_model_from_registry",
             "*:find_model_local_ckpt_path", "lightning.pytorch.utilities.model_registry:*",
             "lightning.*.utilities.consolidate_checkpoint:*"), "names",
            "Lightning AI's own services and command lines: LitLogger's helpers (`LitLogger` itself is served and "
            "raises what Lightning raises without `litlogger`), the model registry, "
            "the Trainer's checkpoint-consolidation script; Relay "
            "has its own command line (`python -m trainer`)", NOT_SERVED),
    Allowed(("lightning.pytorch.utilities.deepspeed:*", "lightning.pytorch.utilities.model_summary.model_summary_deepspeed:*",
             "*:DeepSpeedSummary", "lightning.*.strategies.model_parallel:_*",
             "lightning.*.strategies.ddp:_*"),
            "names",
            "Lightning's strategy-specific helpers (DeepSpeed checkpoint conversion and summaries, FSDP/model-parallel "
            "state-dict and checkpoint internals): Relay's DeepSpeed, FSDP and model-parallel strategies keep their own "
            "checkpoint layouts and code", NOT_SERVED),
    Allowed(("lightning.*:_*",), "names",
            "Other private helpers of Lightning's plugins and utilities that no project tried so far imports; "
            "each is served on request (a line in `trainer/lightning_compat/names.py`, often a small function in "
            "`trainer/lightning_compat/impl/`)", NOT_SERVED),
    Allowed(("lightning.pytorch.callbacks.progress.rich_progress:*", "*:Tqdm"), "names",
            "Lightning's progress-bar drawing (rich columns and theme, its tqdm subclass): Relay's bars draw "
            "themselves", NOT_SERVED),
    Allowed(("lightning.pytorch.accelerators.cuda:get_nvidia_gpu_stats", "lightning.pytorch.accelerators.mps:get_device_stats",
             "lightning.pytorch.utilities.parsing:*", "*:save_hyperparameters", "*:parse_class_init_keys",
             "lightning.pytorch.utilities.compile:*", "*:get_torchvision_model", "*:has_len_all_ranks",
             "lightning.pytorch.demos.mnist_datamodule:*",
             "lightning.pytorch.profilers.pytorch:*"),
            "names",
            "Public helpers not served yet: device-stats readers (nvidia-smi, MPS), hparams frame parsing (Relay's "
            "`save_hyperparameters` is its own), compile wrappers, the MNIST demo (it downloads), profiler "
            "internals", NOT_SERVED),
    Allowed(("*Strategy*", "*Accelerator*", "*Precision*", "*Environment*", "*CheckpointIO*"), "signatures",
            "Relay's strategies, accelerators, precisions and cluster environments are its own plugin protocol: "
            "they are built from Lightning's main arguments (`DDPStrategy(find_unused_parameters=...)`, "
            "`MixedPrecision(precision)`) but their methods are the ones Relay's engine calls; a subclass overriding "
            "Lightning's internal strategy methods does not run on Relay", LISTED),
    Allowed(("lightning.pytorch.loggers.*:CSVLogger", "lightning.pytorch.loggers.*:TensorBoardLogger",
             "lightning.pytorch.loggers.*:MLFlowLogger"), "signatures",
            "the default run name is `relay_logs` in Relay's own signature (Lightning: `lightning_logs`)", LISTED),
    Allowed(("lightning.pytorch.loggers.litlogger:LitLogger.*",), "signatures",
            "methods of a class that cannot be constructed here (its constructor raises what Lightning raises without "
            "the `litlogger` package)", LISTED),
    # served, but raise when constructed or called (``__relay_refused__``): Lightning engine internals Relay does not run
    Allowed(("lightning.fabric.connector:_Connector", "lightning.fabric.fabric:_Connector"), "refused",
            "Lightning Fabric's connector (choosing accelerator, strategy, precision and environment from the "
            "arguments): Relay's `Fabric` makes that choice itself; the class imports and raises when constructed",
            RAISES_ON_USE),
    Allowed(("lightning.fabric.strategies*:_SubprocessScriptLauncher", "*:_ChildProcessObserver",
             "*:_launch_process_observer"), "refused",
            "Lightning's script-relaunching launcher and its child-process watcher: Relay starts and watches workers "
            "with its launcher on torch.distributed.elastic; they import and raise when used", RAISES_ON_USE),
    Allowed(("lightning.fabric.cli:_main", "lightning.fabric.cli:_run", "lightning.fabric.cli:_consolidate",
             "lightning.fabric.cli:main", "lightning.fabric.cli:_torchrun_launch"), "refused",
            "the `fabric run` / `fabric consolidate` command line: Relay has its own (`python -m trainer`); they "
            "import and raise when called", RAISES_ON_USE),
    Allowed(("lightning.*.strategies.model_parallel:_load_checkpoint", "lightning.fabric.strategies.model_parallel:_save_checkpoint",
             "lightning.fabric.utilities.load:_LazyLoadingUnpickler", "lightning.fabric._graveyard.tpu:_patch_*"),
            "refused",
            "internals Relay does its own way: the model-parallel strategy's checkpoint save/load (Relay's strategy "
            "writes a sharded directory that loads into any world size), Lightning's pickle-based lazy-loading "
            "unpickler (Relay's `_lazy_load` memory-maps through torch.load's weights-only unpickler), the TPU "
            "graveyard's module patching (Relay's aliases serve the legacy TPU names); they import and raise when "
            "used", RAISES_ON_USE),
    Allowed(NOT_ALIGNED, "signatures",
            "Not aligned yet (each listed): "
            "`LightningCLI`'s parser options, progress-bar and checkpoint-callback helper methods, `Fabric.run`/"
            "`sharded_model` (deprecated in Lightning), profilers' extra options, hook mixins' dataloader methods",
            LISTED),
]
