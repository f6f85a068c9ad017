"""Lightning names served one at a time, like ``names.NAMES``: engine part (`lightning.pytorch` loops, trainer connectors, strategies, launchers, overrides, tuner, plugins, core) (merged into ``names.NAMES``).

Keyed by the Lightning module that defines each name (re-exporting modules follow). The implementations are in
``impl/loops_*.py``; each file's docstring says which of the three ways (Relay's own helper, Relay's counterpart,
a clear error) its names take.
"""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"


def _from(module: str, impl: str, *names: str) -> dict[str, str]:
    return {f"{_P}.{module}:{n}": f"{_IMPL}.{impl}:{n}" for n in names}


# old precision-plugin names -> (module under lightning.pytorch.plugins.precision, new name); also what
# impl/loops_legacy_precision.py builds the deprecated classes from
RENAMED_PRECISIONS = {
    "BitsandbytesPrecisionPlugin": ("bitsandbytes", "BitsandbytesPrecision"),
    "DeepSpeedPrecisionPlugin": ("deepspeed", "DeepSpeedPrecision"),
    "DoublePrecisionPlugin": ("double", "DoublePrecision"),
    "FSDPPrecisionPlugin": ("fsdp", "FSDPPrecision"),
    "HalfPrecisionPlugin": ("half", "HalfPrecision"),
    "MixedPrecisionPlugin": ("amp", "MixedPrecision"),
    "PrecisionPlugin": ("precision", "Precision"),
    "TransformerEnginePrecisionPlugin": ("transformer_engine", "TransformerEnginePrecision"),
    "XLAPrecisionPlugin": ("xla", "XLAPrecision"),
}

NAMES: dict[str, str] = {
    **_from("loops.progress", "loops_progress", "_BaseProgress", "_ReadyCompletedTracker", "_StartedTracker",
            "_ProcessedTracker", "_Progress", "_BatchProgress", "_SchedulerProgress", "_OptimizerProgress",
            "_OptimizationProgress"),
    **_from("loops.loop", "loops_progress", "_Loop"),
    **_from("loops.optimization.closure", "loops_closure", "OutputResult", "AbstractClosure"),
    **_from("loops.optimization.automatic", "loops_closure", "ClosureResult", "Closure"),
    **_from("loops.optimization.manual", "loops_closure", "ManualResult"),
    **_from("loops.fetchers", "loops_fetchers", "_DataFetcher", "_PrefetchDataFetcher", "_DataLoaderIterDataFetcher",
            "_DataFetcherWrapper", "_profile_nothing"),
    **_from("overrides.distributed", "loops_samplers", "UnrepeatedDistributedSampler",
            "UnrepeatedDistributedSamplerWrapper", "_IndexBatchSamplerWrapper", "_find_tensors",
            "prepare_for_backward", "_sync_module_states", "_register_ddp_comm_hook"),
    **_from("strategies.launchers.launcher", "loops_launchers", "_Launcher"),
    **_from("strategies.launchers.multiprocessing", "loops_launchers", "_MultiProcessingLauncher",
            "_GlobalStateSnapshot", "_WorkerOutput"),
    **_from("strategies.launchers.subprocess_script", "loops_launchers", "_SubprocessScriptLauncher"),
    **_from("trainer.connectors.data_connector", "loops_data", "_DataLoaderSource", "_request_dataloader",
            "_DataHookSelector", "_check_dataloader_iterable", "_worker_check", "_parse_num_batches",
            "_resolve_overfit_batches"),
    **_from("loops.utilities", "loops_data", "check_finite_loss", "_parse_loop_limits", "_block_parallel_sync_behavior",
            "_is_max_limit_reached", "_reset_progress", "_select_data_fetcher", "_no_grad_context",
            "_verify_dataloader_idx_requirement"),
    **_from("loops.fit_loop", "loops_objects", "_FitLoop"),
    **_from("loops.training_epoch_loop", "loops_objects", "_TrainingEpochLoop"),
    **_from("loops.evaluation_loop", "loops_objects", "_EvaluationLoop"),
    **_from("loops.prediction_loop", "loops_objects", "_PredictionLoop"),
    **_from("loops.optimization.automatic", "loops_objects", "_AutomaticOptimization"),
    **_from("loops.optimization.manual", "loops_objects", "_ManualOptimization"),
    **_from("core.optimizer", "loops_optimizer", "_MockOptimizer", "_configure_optimizers",
            "_configure_schedulers_automatic_opt", "_configure_schedulers_manual_opt", "_init_optimizers_and_lr_schedulers",
            "_validate_multiple_optimizers_support", "_validate_optim_conf", "_validate_optimizers_attached",
            "_validate_scheduler_api"),
    **_from("trainer.connectors.accelerator_connector", "loops_connectors", "_AcceleratorConnector", "_set_torch_flags"),
    **_from("trainer.connectors.callback_connector", "loops_connectors", "_CallbackConnector",
            "_validate_callbacks_list"),
    **_from("trainer.connectors.signal_connector", "loops_connectors", "_SignalConnector", "_HandlersCompose",
            "_get_sigkill_signal"),
    **_from("trainer.connectors.logger_connector.fx_validator", "loops_connectors", "_FxValidator"),
    **_from("trainer.connectors.logger_connector.result", "loops_connectors", "_Sync", "_Metadata",
            "_ResultCollection", "_ResultMetric"),
    **_from("trainer.connectors.logger_connector.logger_connector", "loops_connectors", "_LoggerConnector"),
    **_from("trainer.connectors.checkpoint_connector", "loops_connectors", "_CheckpointConnector"),
    **_from("trainer.connectors.data_connector", "loops_connectors", "_DataConnector"),
    **_from("trainer.configuration_validator", "loops_connectors", "_verify_loop_configurations",
            "__verify_train_val_loop_configuration", "__verify_eval_loop_configuration",
            "__verify_manual_optimization_support", "__warn_dataloader_iter_limitations",
            "__verify_configure_model_configuration"),
    **_from("core.module", "loops_module", "_TrainerFabricShim"),
    **_from("plugins.precision.double", "loops_module", "LightningDoublePrecisionModule"),
    **_from("serve.servable_module", "loops_module", "ServableModule"),
    **_from("serve.servable_module_validator", "loops_module", "ServableModuleValidator"),
    **{f"{_P}.loops.{m}:RestartStage": f"{_IMPL}.loops_trainer_calls:{c}" for m, c in (
        ("fit_loop", "_FitRestartStage"), ("training_epoch_loop", "_EpochRestartStage"),
        ("evaluation_loop", "_EvaluationRestartStage"))},
    **_from("trainer.call", "loops_trainer_calls", "_call_lightning_module_hook", "_call_lightning_datamodule_hook",
            "_call_callback_hooks", "_call_callbacks_state_dict", "_call_callbacks_on_save_checkpoint",
            "_call_callbacks_on_load_checkpoint", "_call_callbacks_load_state_dict", "_call_strategy_hook",
            "_call_and_handle_interrupt", "_interrupt", "_call_setup_hook", "_call_configure_model",
            "_call_teardown_hook"),
    **_from("trainer.setup", "loops_trainer_calls", "_determine_batch_limits", "_parse_time_interval_seconds",
            "_init_profiler", "_init_debugging_flags"),
    **_from("trainer.setup", "trainer_init", "_log_device_info"),
    **_from("tuner.tuning", "loops_trainer_calls", "_check_lr_find_configuration",
            "_check_scale_batch_size_configuration"),
    **_from("tuner.lr_finder", "loops_trainer_calls", "_determine_lr_attr_name", "__lr_finder_dump_params",
            "__lr_finder_reset_params", "__lr_finder_restore_params", "_try_loop_run"),
    **_from("tuner.batch_size_scaling", "loops_trainer_calls", "__scale_batch_dump_params",
            "__scale_batch_reset_params", "__scale_batch_restore_params", "_run_power_scaling",
            "_run_binsearch_scaling", "_adjust_batch_size", "_reset_dataloaders", "_try_loop_run", "_reset_progress"),
    **_from("trainer.connectors.logger_connector.result", "loops_trainer_calls", "_get_default_dtype"),
    **_from("trainer.connectors.logger_connector.result", "loops_connectors", "_METRICS"),
    **_from("trainer.connectors.data_connector", "loops_data", "_get_distributed_sampler", "_process_dataloader"),
    **_from("strategies.strategy", "loops_plugins", "_ForwardRedirection"),
    **_from("strategies.ddp", "loops_plugins", "_DDPForwardRedirection"),
    **_from("strategies.deepspeed", "loops_plugins", "remove_module_hooks"),
    **_from("plugins.io.wrapper", "loops_plugins", "_WrappingCheckpointIO"),
    **_from("plugins.io.async_plugin", "loops_plugins", "_clone_tensor"),
    **_from("plugins.layer_sync", "loops_plugins", "_BatchNormXd"),
    **_from("core.module", "loops_plugins", "_jit_is_scripting"),
    # the deprecated *PrecisionPlugin names: one class each, the same object at every path Lightning sets it on
    **{f"{_P}.{where}:{old}": f"{_IMPL}.loops_legacy_precision:{old}"
       for old, module in (*((o, m) for o, (m, _) in RENAMED_PRECISIONS.items()), ("FSDPMixedPrecisionPlugin", "fsdp"))
       for where in ("plugins", "plugins.precision", f"plugins.precision.{module}")},
    f"{_P}._graveyard.precision:FSDPMixedPrecisionPlugin": f"{_IMPL}.loops_legacy_precision:FSDPMixedPrecisionPlugin",
}
