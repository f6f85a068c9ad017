"""Lightning names served one at a time: ``"lightning module:name" -> "relay module:attr"``.

Keyed by the Lightning module that *defines* the name (the walk records the packages that re-export it, and
those follow here). Also Relay's own extras under a Lightning package (``DDPSpawnStrategy``, ``ROCmAccelerator``).
"""

from __future__ import annotations

from trainer.lightning_compat import names_fabric, names_loops, names_utilities
from trainer.lightning_compat.impl import graveyard_tpu

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"

_ACCELERATORS = {"accelerator": "Accelerator:plugins.accelerators.base", "cpu": "CPUAccelerator:plugins.accelerators.cpu",
                 "cuda": "CUDAAccelerator:plugins.accelerators.cuda", "mps": "MPSAccelerator:plugins.accelerators.mps"}
_STRATEGIES = {"strategy": "Strategy:plugins.strategies.base", "single_device": "SingleDeviceStrategy:plugins.strategies.single_device",
               "parallel": "ParallelStrategy:plugins.strategies.parallel", "ddp": "DDPStrategy:plugins.strategies.ddp",
               "fsdp": "FSDPStrategy:plugins.strategies.fsdp", "deepspeed": "DeepSpeedStrategy:plugins.strategies.deepspeed",
               "model_parallel": "ModelParallelStrategy:plugins.strategies.model_parallel"}


def _each(root: str, package: str, table: dict[str, str]) -> dict[str, str]:
    out = {}
    for module, spec in table.items():
        name, _, relay = spec.partition(":")
        out[f"{root}.{package}.{module}:{name}"] = f"{relay}:{name}"
    return out


NAMES: dict[str, str] = {
    f"{_P}.core.module:LightningModule": "trainer.module:Module",
    f"{_P}.core.datamodule:LightningDataModule": "trainer.datamodule:DataModule",
    **_each(_P, "accelerators", _ACCELERATORS),
    **_each(_F, "accelerators", _ACCELERATORS),
    f"{_F}.accelerators.cuda:find_usable_cuda_devices": "plugins.accelerators.usable_cuda:find_usable_cuda_devices",
    f"{_P}.accelerators:ROCmAccelerator": "plugins.accelerators.rocm:ROCmAccelerator",
    f"{_P}.accelerators:XPUAccelerator": "plugins.accelerators.xpu:XPUAccelerator",
    **_each(_P, "strategies", _STRATEGIES),
    **_each(_F, "strategies", _STRATEGIES),
    # Lightning's FSDP1-style arguments and checkpoint calls over Relay's FSDP2 engine
    f"{_F}.strategies.fsdp:FSDPStrategy": f"{_IMPL}.lightning_sharded:FSDPStrategy",
    f"{_P}.strategies.fsdp:FSDPStrategy": f"{_IMPL}.lightning_sharded:TrainerFSDPStrategy",
    f"{_F}.strategies.model_parallel:ModelParallelStrategy": f"{_IMPL}.lightning_sharded:ModelParallelStrategy",
    f"{_P}.strategies.model_parallel:ModelParallelStrategy": f"{_IMPL}.lightning_sharded:TrainerModelParallelStrategy",
    f"{_P}.strategies:DDPSpawnStrategy": "plugins.strategies.ddp_spawn:DDPSpawnStrategy",
    f"{_P}.strategies:HorovodStrategy": "plugins.strategies.horovod:HorovodStrategy",
    f"{_F}.strategies:DDPSpawnStrategy": "plugins.strategies.ddp_spawn:DDPSpawnStrategy",
    f"{_F}.strategies:HorovodStrategy": "plugins.strategies.horovod:HorovodStrategy",
    f"{_F}.strategies.registry:_StrategyRegistry": "trainer.fabric.registries:StrategyRegistry",
    f"{_F}.strategies:STRATEGY_REGISTRY": "trainer.fabric.registries:STRATEGY_REGISTRY",
    f"{_F}.strategies.registry:STRATEGY_REGISTRY": "trainer.fabric.registries:STRATEGY_REGISTRY",
    # hardware- and package-bound pieces: import everywhere, raise on construction as Lightning does without them
    **{f"{_F}.accelerators.xla:{n}": f"{_IMPL}.xla:{n}" for n in ("XLAAccelerator", "_using_pjrt", "_parse_tpu_devices")},
    f"{_P}.accelerators.xla:XLAAccelerator": f"{_IMPL}.xla:TrainerXLAAccelerator",
    f"{_F}.strategies.xla:XLAStrategy": f"{_IMPL}.xla:XLAStrategy",
    f"{_P}.strategies.xla:XLAStrategy": f"{_IMPL}.xla:TrainerXLAStrategy",
    f"{_F}.strategies.xla_fsdp:XLAFSDPStrategy": f"{_IMPL}.xla:XLAFSDPStrategy",
    f"{_F}.strategies.single_xla:SingleDeviceXLAStrategy": f"{_IMPL}.xla:SingleDeviceXLAStrategy",
    f"{_P}.strategies.single_xla:SingleDeviceXLAStrategy": f"{_IMPL}.xla:TrainerSingleDeviceXLAStrategy",
    f"{_F}.plugins.precision.xla:XLAPrecision": f"{_IMPL}.xla:XLAPrecision",
    f"{_P}.plugins.precision.xla:XLAPrecision": f"{_IMPL}.xla:TrainerXLAPrecision",
    f"{_F}.plugins.environments.xla:XLAEnvironment": f"{_IMPL}.xla:XLAEnvironment",
    f"{_F}.plugins.io.xla:XLACheckpointIO": f"{_IMPL}.xla:XLACheckpointIO",
    f"{_P}.profilers.xla:XLAProfiler": f"{_IMPL}.xla:XLAProfiler",
    f"{_F}.strategies.launchers.xla:_XLALauncher": f"{_IMPL}.xla:_XLALauncher",
    f"{_P}.strategies.launchers.xla:_XLALauncher": f"{_IMPL}.xla:_XLALauncher",
    **{f"{root}.plugins.precision.{module}:{name}": f"{_IMPL}.quantization:{name}"
       for root in (_P, _F) for module, name in (("bitsandbytes", "BitsandbytesPrecision"),
                                                 ("transformer_engine", "TransformerEnginePrecision"))},
    # small helpers real projects import
    **{f"{_F}.utilities.load:{n}": f"{_IMPL}.loading:{n}"
       for n in ("_NotYetLoadedTensor", "_lazy_load", "_materialize_tensors", "_move_state_into")},
    **{f"{_F}.utilities.init:{n}": f"{_IMPL}.meta_init:{n}"
       for n in ("_EmptyInit", "_materialize", "_materialize_meta_tensors", "_materialize_distributed_module",
                 "_has_meta_device_parameters_or_buffers")},
    f"{_F}.utilities.types:_Stateful": f"{_IMPL}.types:_Stateful",
    f"{_F}.utilities.types:Steppable": f"{_IMPL}.types:Steppable",
    f"{_F}.utilities.types:ReduceOp": "torch.distributed:ReduceOp",
    f"{_F}.utilities.types:RedOpType": "torch.distributed:ReduceOp.RedOpType",
    f"{_F}.utilities.types:ProcessGroup": "torch.distributed:ProcessGroup",
    f"{_F}.utilities.types:UntypedStorage": "torch:UntypedStorage",
    f"{_F}.utilities.testing._runif:_runif_reasons": f"{_IMPL}.runif:_fabric_runif_reasons",
    f"{_P}.utilities.testing._runif:_runif_reasons": f"{_IMPL}.runif:_trainer_runif_reasons",
    f"{_F}.wrappers:_FabricOptimizer": "trainer.fabric.wrappers:FabricOptimizer",
    f"{_F}.wrappers:_FabricModule": "trainer.fabric.wrappers:FabricModule",
    f"{_F}.wrappers:_FabricDataLoader": "trainer.fabric.wrappers:FabricDataLoader",
    **{f"{_P}.utilities.combined_loader:{n}": f"{_IMPL}.combined:{n}"
       for n in ("_ModeIterator", "_MinSize", "_MaxSizeCycle", "_MaxSize", "_Sequential", "_CombinationMode",
                 "_SUPPORTED_MODES", "_get_iterables_lengths", "_shutdown_workers_and_reset_iterator")},
    **{f"{_P}.loggers.logger:{n}": f"{_IMPL}.logging_helpers:{n}" for n in ("DummyLogger", "merge_dicts")},
    **{f"{_F}.loggers.logger:{n}": f"{_IMPL}.logging_helpers:{n}" for n in ("_DummyExperiment", "rank_zero_experiment")},
    **{f"{_P}.core.saving:{n}": f"{_IMPL}.saving:{n}"
       for n in ("load_hparams_from_yaml", "save_hparams_to_yaml", "load_hparams_from_tags_csv",
                 "save_hparams_to_tags_csv", "convert", "update_hparams")},
    **{f"{_P}.utilities.model_summary.model_summary:{n}": f"{_IMPL}.model_summary:{n}"
       for n in ("LayerSummary", "ModelSummary", "summarize", "get_human_readable_count", "get_formatted_model_size",
                 "parse_batch_shape")},
    f"{_P}.core.mixins.hparams_mixin:HyperparametersMixin": "trainer.model.hparams:HyperparametersMixin",
    f"{_P}.core.hooks:DataHooks": f"{_IMPL}.hooks:DataHooks",
    f"{_P}.core.hooks:ModelHooks": f"{_IMPL}.hooks:ModelHooks",
    f"{_P}.core.hooks:CheckpointHooks": f"{_IMPL}.hooks:CheckpointHooks",
    **{f"{root}.plugins.precision.{module}:{name}": f"{_IMPL}.precision_objects:{name}"
       for root in (_P, _F) for module, name in (("fsdp", "FSDPPrecision"), ("deepspeed", "DeepSpeedPrecision"))},
    f"{_P}.plugins.precision.fsdp:FSDPPrecision": f"{_IMPL}.precision_objects:TrainerFSDPPrecision",
    f"{_P}.plugins.precision.deepspeed:DeepSpeedPrecision": f"{_IMPL}.precision_objects:TrainerDeepSpeedPrecision",
    f"{_F}.strategies.dp:DataParallelStrategy": f"{_IMPL}.misc:DataParallelStrategy",
    **{f"{_F}.accelerators.cuda:{n}": f"{_IMPL}.misc:{n}" for n in ("is_cuda_available", "num_cuda_devices")},
    f"{_F}.plugins.environments.lightning:find_free_network_port": f"{_IMPL}.misc:find_free_network_port",
    f"{_P}.core.optimizer:do_nothing_closure": f"{_IMPL}.misc:do_nothing_closure",
    f"{_P}.core.optimizer:LightningOptimizer": "trainer.model.optimizers:OptimizerHandle",
    f"{_P}.utilities.signature_utils:is_param_in_hook_signature": f"{_IMPL}.misc:is_param_in_hook_signature",
    **{f"{_P}.utilities.data:{n}": f"{_IMPL}.misc:{n}"
       for n in ("extract_batch_size", "_extract_batch_size", "_is_dataloader_shuffled")},
    f"{_F}.utilities.data:_set_sampler_epoch": f"{_IMPL}.misc:_set_sampler_epoch",
    **{f"{_P}.utilities.memory:{n}": f"{_IMPL}.misc:{n}" for n in ("recursive_detach", "is_cudnn_snafu")},
    f"{_F}.utilities.spike:TrainingSpikeException": "trainer.callbacks.spike:TrainingSpikeException",
    **{f"{_P}.demos.boring_classes:{n}": f"{_IMPL}.demos:{n}"
       for n in ("RandomIterableDatasetWithLen", "BoringDataModuleNoLen", "IterableBoringDataModule", "Net")},
    **{f"{_P}.callbacks.progress.progress_bar:{n}": f"{_IMPL}.progress:{n}" for n in ("get_standard_metrics",)},
    f"{_P}.callbacks.progress.tqdm_progress:convert_inf": f"{_IMPL}.progress:convert_inf",
    f"{_P}.loggers.utilities:_version": f"{_IMPL}.progress:_version",
    f"{_P}.accelerators.cpu:get_cpu_stats": f"{_IMPL}.misc:get_cpu_stats",
    f"{_P}:cli_lightning_logo": f"{_IMPL}.misc:cli_lightning_logo",
    **{f"{_P}.loggers.litlogger:{n}": f"{_IMPL}.litlogger:{n}" for n in ("LitLogger", "_LITLOGGER_AVAILABLE")},
    f"{_P}.callbacks.early_stopping:EarlyStoppingReason": "trainer.callbacks.early_stopping:EarlyStoppingReason",
    f"{_P}.accelerators:AcceleratorRegistry": "trainer.fabric.registries:ACCELERATOR_REGISTRY",
    f"{_F}.accelerators.registry:_AcceleratorRegistry": "trainer.fabric.registries:AcceleratorRegistry",
    f"{_F}.utilities.cloud_io:_load": f"{_IMPL}.loading:_load",
    **{f"{_F}.utilities.logger:{n}": f"{_IMPL}.utilities:{n}"
       for n in ("_convert_params", "_sanitize_callable_params", "_flatten_dict", "_sanitize_params",
                 "_is_json_serializable", "_convert_json_serializable", "_add_prefix")},
    **{f"{_F}.utilities.seed:{n}": f"{_IMPL}.utilities:{n}" for n in ("_collect_rng_states", "_set_rng_states")},
    **{f"{_F}.utilities.optimizer:{n}": f"{_IMPL}.utilities:{n}" for n in ("_optimizer_to_device", "_optimizers_to_device")},
    f"{_F}.utilities.rank_zero:_get_rank": f"{_IMPL}.utilities:_get_rank",
    f"{_F}.utilities.rank_zero:rank_zero_only": f"{_IMPL}.rank_zero_current:rank_zero_only",
    **{f"{_F}.utilities.cloud_io:{n}": f"{_IMPL}.utilities:{n}"
       for n in ("_is_local_file_protocol", "_is_object_storage", "_is_dir")},
    **{f"{_P}._graveyard.hpu:{n}": f"{_IMPL}.graveyard:{n}"
       for n in ("HPUAccelerator", "HPUParallelStrategy", "SingleHPUStrategy", "HPUCheckpointIO", "HPUPrecisionPlugin")},
    **{f"{_F}.utilities.distributed:{n}": f"{_IMPL}.utilities:{n}"
       for n in ("_distributed_is_initialized", "_get_default_process_group_backend_for_device", "_is_dtensor",
                 "_suggested_max_num_threads", "_set_num_threads_if_needed")},
    f"{_F}.utilities.data:_num_cpus_available": f"{_IMPL}.utilities:_num_cpus_available",
    f"{_F}.wrappers:_unwrap_objects": f"{_IMPL}.utilities:_unwrap_objects",
    # Lightning's ThroughputMonitor (its keys, every batch measured); Relay's own keeps trainer.callbacks'
    f"{_P}.callbacks:ThroughputMonitor": "trainer.callbacks.lightning_throughput:ThroughputMonitor",
    f"{_P}.callbacks.throughput_monitor:ThroughputMonitor": "trainer.callbacks.lightning_throughput:ThroughputMonitor",
    f"{_P}.callbacks.progress.rich_progress:RichProgressBarTheme": "trainer.callbacks.rich_support:RichProgressBarTheme",
    f"{_F}.loggers.csv_logs:_ExperimentWriter": "trainer.loggers.csv_logs:ExperimentWriter",
    **{f"{_F}.accelerators.cuda:{n}": f"{_IMPL}.utilities:{n}"
       for n in ("_get_all_visible_cuda_devices", "_is_ampere_or_later", "_clear_cuda_memory")},
    **{f"{_P}.utilities.parameter_tying:{n}": f"{_IMPL}.utilities:{n}"
       for n in ("_get_module_by_path", "_set_module_by_path", "_find_shared_parameters")},
    **names_fabric.NAMES,
    **names_loops.NAMES,
    **names_utilities.NAMES,
    **graveyard_tpu.names(),
}
