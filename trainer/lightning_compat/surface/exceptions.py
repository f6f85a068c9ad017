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
REFUSED_UTILS = ("tests/compat/test_lightning_names_utils.py::"
                 "test_lightning_internals_without_a_relay_counterpart_import_and_raise_naming_relays_way")

# public signatures that differ today, each by name: a new difference is a finding, not covered here
NOT_ALIGNED = (
    "lightning.fabric.fabric:Fabric.load_raw",
    "lightning.fabric.fabric:Fabric.setup",
    "lightning.pytorch.callbacks.lambda_function:LambdaCallback",
    "lightning.pytorch.callbacks.model_summary:ModelSummary.summarize",
    "lightning.pytorch.callbacks.progress.rich_progress:RichProgressBar",
    "lightning.pytorch.callbacks.rich_model_summary:RichModelSummary.summarize",
    "lightning.pytorch.cli:LightningArgumentParser",
    "lightning.pytorch.cli:LightningArgumentParser.add_lr_scheduler_args",
    "lightning.pytorch.cli:LightningCLI",
    "lightning.pytorch.core.mixins.hparams_mixin:HyperparametersMixin.save_hyperparameters",
    "lightning.pytorch.core.module:LightningModule.to_tensorrt",
    "lightning.pytorch.core.optimizer:LightningOptimizer.toggle_model",
    "lightning.pytorch.demos.transformer:Transformer.generate_square_subsequent_mask",
    "lightning.pytorch.demos.transformer:WikiText2.download",
    "lightning.pytorch.trainer.trainer:Trainer",
    "lightning.pytorch.utilities.types:DistributedDataParallel",
)

ALLOWED: list[Allowed] = [
    Allowed(("lightning.*.strategies.model_parallel:_*",),
            "names",
            "Lightning's strategy-specific helpers (FSDP/model-parallel "
            "state-dict and checkpoint internals): Relay's DeepSpeed, FSDP and model-parallel strategies keep their own "
            "checkpoint layouts and code", NOT_SERVED),
    Allowed(("lightning.*:_*",), "names",
            "Other private helpers of Lightning's plugins and utilities that no project tried so far imports; "
            "each is served on request (a line in `trainer/lightning_compat/names.py`, often a small function in "
            "`trainer/lightning_compat/impl/`)", NOT_SERVED),
    Allowed(("lightning.pytorch.demos.mnist_datamodule:*",), "names",
            "Public helpers not served yet: the MNIST demo (it downloads)", NOT_SERVED),
    Allowed(("*Strategy*", "*Accelerator*", "*Precision*", "*CheckpointIO*"), "signatures",
            "Relay's strategies, accelerators and precisions are its own plugin protocol: "
            "they are built from Lightning's main arguments (`DDPStrategy(find_unused_parameters=...)`, "
            "`MixedPrecision(precision)`) but their methods are the ones Relay's engine calls; a subclass overriding "
            "Lightning's internal strategy methods does not run on Relay", LISTED),
    Allowed(("lightning.pytorch.loggers.*:CSVLogger", "lightning.pytorch.loggers.*:TensorBoardLogger",
             "lightning.pytorch.loggers.*:MLFlowLogger"), "signatures",
            "the default run name is `relay_logs` in Relay's own signature (Lightning: `lightning_logs`)", LISTED),
    # served, but raise when constructed or called (``__relay_refused__``): Lightning engine internals Relay does not run
    Allowed(("lightning.fabric.connector:_Connector", "lightning.fabric.fabric:_Connector"), "refused",
            "Lightning Fabric's connector (choosing accelerator, strategy, precision and environment from the "
            "arguments): Relay's `Fabric` makes that choice itself; the class imports and raises when constructed",
            RAISES_ON_USE),
    Allowed(("lightning.fabric.strategies*:_SubprocessScriptLauncher", "*:_ChildProcessObserver",
             "*:_launch_process_observer"), "refused",
            "Lightning's script-relaunching launcher and its child-process watcher: Relay starts and watches workers "
            "with its launcher on torch.distributed.elastic; they import and raise when used", RAISES_ON_USE),
    Allowed(("lightning.*.strategies.model_parallel:_load_checkpoint", "lightning.fabric.strategies.model_parallel:_save_checkpoint",
             "lightning.fabric.utilities.load:_LazyLoadingUnpickler", "lightning.fabric._graveyard.tpu:_patch_*"),
            "refused",
            "internals Relay does its own way: the model-parallel strategy's checkpoint save/load (Relay's strategy "
            "writes a sharded directory that loads into any world size), Lightning's pickle-based lazy-loading "
            "unpickler (Relay's `_lazy_load` memory-maps through torch.load's weights-only unpickler), the TPU "
            "graveyard's module patching (Relay's aliases serve the legacy TPU names); they import and raise when "
            "used", RAISES_ON_USE),
    Allowed(("lightning.pytorch.utilities.deepspeed:convert_zero_checkpoint_to_fp32_state_dict",
             "lightning.pytorch.utilities.deepspeed:ds_checkpoint_dir", "*:DeepSpeedSummary",
             "lightning.pytorch.utilities.model_summary.model_summary_deepspeed:DeepSpeedLayerSummary",
             "lightning.pytorch.profilers.pytorch:ScheduleWrapper", "lightning.pytorch.cli:_InstantiatorFn",
             "lightning.pytorch._graveyard.*:_patch_*", "lightning.pytorch._graveyard.precision:_create_class"), "refused",
            "Lightning's DeepSpeed checkpoint layout and ZeRO-3 summaries (Relay's DeepSpeed strategy writes its own "
            "directory, `python -m trainer convert-checkpoint` merges it; Relay's summary counts sharded models), its "
            "PyTorchProfiler schedule wrapper, LightningCLI's instantiation hook and the graveyard's import-time "
            "module patching (Relay's aliases serve the removed names); they import and raise when used",
            REFUSED_UTILS),
    Allowed(NOT_ALIGNED, "signatures",
            "Not aligned yet (each listed): "
            "`LightningCLI`'s parser options, progress-bar and checkpoint-callback helper methods, "
            "profilers' extra options, hook mixins' dataloader methods",
            LISTED),
]
