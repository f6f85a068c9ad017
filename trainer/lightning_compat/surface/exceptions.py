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
LISTED = f"{TESTS}::test_every_finding_is_an_allowed_exception_and_every_exception_still_holds"

ALLOWED: list[Allowed] = [
    Allowed(("lightning.pytorch.loops*:*", "lightning.pytorch.trainer.call:*",
             "lightning.pytorch.trainer.configuration_validator:*", "lightning.pytorch.trainer.connectors.*:*",
             "lightning.pytorch.trainer.setup:*", "lightning.pytorch.tuner.*:_*", "lightning.pytorch.core.optimizer:_*",
             "lightning.fabric.connector:*", "lightning.*.strategies.launchers.*:*", "lightning.pytorch.overrides.*:*",
             "lightning.pytorch.utilities.migration*:*", "lightning.pytorch.utilities.upgrade_checkpoint:*",
             "lightning.pytorch.core.module:_*", "lightning.pytorch.core.module:MODULE_OPTIMIZERS"), "names",
            "Lightning's engine: its loop objects, connectors, hook dispatch, launchers, configuration checks and "
            "old-checkpoint migration. Relay's engine is its own (same hooks, same order, checked differentially); "
            "code that subclasses or patches these objects does not run on Relay", NOT_SERVED),
    Allowed(("*:LitLogger", "lightning.pytorch.loggers.litlogger:*", "*:download_model_from_registry",
             "*:find_model_local_ckpt_path", "lightning.pytorch.utilities.model_registry:*", "lightning.pytorch.serve*:*",
             "lightning.fabric.cli:*", "lightning.*.utilities.consolidate_checkpoint:*"), "names",
            "Lightning AI's own services and command lines: LitLogger (the `litlogger` cloud), the model registry, "
            "`serve` (Lightning's serving checks), `fabric run` and the checkpoint-consolidation scripts; Relay "
            "has its own command line (`python -m trainer`)", NOT_SERVED),
    Allowed(("lightning.pytorch.utilities.deepspeed:*", "lightning.pytorch.utilities.model_summary.model_summary_deepspeed:*",
             "*:DeepSpeedSummary", "lightning.*.strategies.deepspeed:*", "*:DeepSpeedPrecision", "*:FSDPPrecision",
             "*:DataParallelStrategy", "lightning.*.strategies.fsdp:_*", "lightning.*.strategies.model_parallel:_*",
             "lightning.*.strategies.ddp:_*", "lightning.*.strategies.strategy:_*", "lightning.*.strategies.xla_fsdp:_*"),
            "names",
            "Lightning's strategy-specific helpers and precision objects: Relay's DeepSpeed, FSDP and model-parallel "
            "strategies take the precision by name (`precision='bf16-mixed'`) and keep their own checkpoint "
            "layouts; `DataParallelStrategy` (threads driving several GPUs) is discouraged by PyTorch in favour of "
            "DDP", NOT_SERVED),
    Allowed(("lightning.*:_*",), "names",
            "Other private helpers of Lightning's plugins and utilities that no project tried so far imports; "
            "each is served on request (a line in `trainer/lightning_compat/names.py`, often a small function in "
            "`trainer/lightning_compat/impl/`)", NOT_SERVED),
    Allowed(("lightning.*:*",), "names",
            "Public names not served yet: rich/tqdm progress-bar internals (Relay draws its own bar), the "
            "collectives API, hparams parsing helpers, demo data modules, profiler internals, device-stats helpers",
            NOT_SERVED),
    Allowed(("*Strategy*", "*Accelerator*", "*Precision*", "*Environment*", "*CheckpointIO*"), "signatures",
            "Relay's strategies, accelerators, precisions and cluster environments are its own plugin protocol: "
            "they are built from Lightning's main arguments (`DDPStrategy(find_unused_parameters=...)`, "
            "`MixedPrecision(precision)`) but their methods are the ones Relay's engine calls; a subclass overriding "
            "Lightning's internal strategy methods does not run on Relay", LISTED),
    Allowed(("lightning.pytorch.loggers.*:CSVLogger", "lightning.pytorch.loggers.*:TensorBoardLogger",
             "lightning.pytorch.loggers.*:MLFlowLogger"), "signatures",
            "the default run name is `relay_logs` in Relay's own signature (Lightning: `lightning_logs`)", LISTED),
    Allowed(("lightning.*:*",), "signatures",
            "Not aligned yet: progress-bar and model-checkpoint helper methods, `LightningCLI`'s parser options, "
            "`LightningModule.log(enable_graph=...)`, `Fabric.run`/`sharded_model` (deprecated in Lightning), the "
            "profilers' extra options", LISTED),
]
