"""Lightning names served one at a time, like ``names.NAMES``: the `lightning.fabric` part (merged into ``names.NAMES``).

Keyed by the Lightning module that defines each name; the modules re-exporting it follow. The implementations are
in ``impl/fabric_*.py`` (their docstrings say the rule: Lightning's behaviour written in Relay, Relay's counterpart,
or an engine internal that raises when used).
"""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"


def _each(module: str, impl: str, names: str) -> dict[str, str]:
    return {f"{_F}.{module}:{name}": f"{_IMPL}.{impl}:{name}" for name in names.split()}


NAMES: dict[str, str] = {
    # helpers with defined behaviour (impl/fabric_helpers.py)
    **_each("accelerators.cpu", "fabric_helpers", "_parse_cpu_cores"),
    **_each("accelerators.cuda", "fabric_helpers", "_check_cuda_matmul_precision"),
    **_each("accelerators.mps", "fabric_helpers", "_get_all_available_mps_gpus"),
    **_each("utilities.device_parser", "fabric_helpers",
            "_check_data_type _check_unique _determine_root_gpu_device _get_all_available_gpus "
            "_normalize_parse_gpu_input_to_list _normalize_parse_gpu_string_input _parse_gpu_ids _sanitize_gpu_ids "
            "_select_auto_accelerator"),
    **_each("utilities.seed", "fabric_helpers", "_generate_seed_sequence"),
    **_each("utilities.warnings", "fabric_helpers", "_is_path_in_lightning _custom_format_warning"),
    **_each("wrappers", "fabric_helpers", "_unwrap_compiled _to_compiled _capture_compile_kwargs"),
    f"{_F}.utilities.throughput:_MonotonicWindow": "trainer.fabric.utilities.throughput:_MonotonicWindow",
    **_each("utilities.registry", "fabric_helpers", "_load_external_callbacks _register_classes"),
    **_each("utilities.cloud_io", "fabric_helpers", "_atomic_save"),
    **_each("utilities.throughput", "fabric_helpers", "_plugin_to_compute_dtype"),
    **_each("wrappers", "fabric_helpers", "_backward_hook"),
    **_each("accelerators.registry", "fabric_helpers", "call_register_accelerators"),
    **_each("plugins.environments.slurm", "fabric_helpers", "_is_slurm_interactive_mode _is_srun_used"),
    **_each("utilities.apply_func", "fabric_helpers", "_TransferableDataType _from_numpy"),
    **_each("accelerators.xla", "fabric_helpers", "_parse_tpu_devices_str _check_tpu_devices_valid"),
    **_each("fabric", "fabric_helpers", "_do_nothing"),
    **_each("connector", "fabric_helpers", "_is_using_cli _convert_precision_to_unified_args"),
    **_each("cli", "fabric_helpers", "_get_supported_strategies _set_env_variables _get_num_processes"),
    # strategy options: FSDP, DeepSpeed, model parallel, XLA-FSDP argument checks (impl/fabric_strategy_options.py)
    **_each("strategies.fsdp", "fabric_strategy_options",
            "_auto_wrap_policy_kwargs _activation_checkpointing_kwargs _setup_activation_checkpointing _init_cpu_offload "
            "_init_sharding_strategy _optimizer_has_flat_params _move_torchmetrics_to_device "
            "_distributed_checkpoint_save _distributed_checkpoint_load"),
    **_each("strategies.model_parallel", "fabric_strategy_options", "_setup_device_mesh _rekey_optimizer_state_if_needed"),
    **_each("strategies.deepspeed", "fabric_strategy_options",
            "_format_precision_config _get_deepspeed_engines_from_state _validate_state_keys "
            "_validate_device_index_selection _is_deepspeed_checkpoint _validate_checkpoint_directory"),
    f"{_F}.strategies.xla_fsdp:_auto_wrap_policy_kwargs": f"{_IMPL}.fabric_strategy_options:_xla_auto_wrap_policy_kwargs",
    f"{_F}.strategies.xla_fsdp:_activation_checkpointing_kwargs":
        f"{_IMPL}.fabric_strategy_options:_xla_activation_checkpointing_kwargs",
    # public utilities with Lightning's checks over Relay's own (impl/fabric_utilities.py)
    **_each("utilities.seed", "fabric_utilities", "seed_everything reset_seed"),
    **_each("utilities.data", "fabric_utilities", "has_len suggested_max_num_workers"),
    # data-loader re-instantiation (impl/fabric_data.py)
    **_each("utilities.data", "fabric_data",
            "_WrapAttrTag _auto_add_worker_init_fn _dataloader_init_kwargs_resolve_sampler "
            "_get_dataloader_init_args_and_kwargs _reinstantiate_wrapped_cls _replace_dunder_methods "
            "_replace_value_in_saved_args _update_dataloader _wrap_attr_method _wrap_init_method"),
    # distributed helpers and collectives (impl/fabric_distributed.py)
    **_each("utilities.distributed", "fabric_distributed",
            "DistributedSamplerWrapper _DatasetSamplerWrapper _InfiniteBarrier _all_gather_ddp_if_available "
            "_destroy_dist_connection _gather_all_tensors _init_dist_connection _simple_gather_all_tensors _sync_ddp "
            "_sync_ddp_if_available group ReduceOp"),
    **_each("utilities.types", "fabric_distributed", "CollectibleGroup"),
    **_each("plugins.collectives.collective", "fabric_distributed", "Collective"),
    **_each("plugins.collectives.single_device", "fabric_distributed", "SingleDeviceCollective"),
    **_each("plugins.collectives.torch_collective", "fabric_distributed", "TorchCollective default_pg_timeout"),
    # precision and module state (impl/fabric_precision.py)
    **_each("plugins.precision.utils", "fabric_precision",
            "_ClassReplacementContextManager _DtypeContextManager _convert_fp_tensor"),
    **_each("plugins.precision.amp", "fabric_precision", "_optimizer_handles_unscaling"),
    **_each("utilities.device_dtype_mixin", "fabric_precision", "_DeviceDtypeModuleMixin _update_properties"),
    **_each("strategies.launchers.multiprocessing", "fabric_precision", "_GlobalStateSnapshot"),
    **_each("plugins.precision.bitsandbytes", "fabric_precision",
            "_import_bitsandbytes _quantize_on_load_hook _ignore_missing_weights_hook _replace_param _convert_layers"),
    f"{_F}.plugins.precision.transformer_engine:_convert_layers": f"{_IMPL}.fabric_precision:_convert_te_layers",
    # launchers: the interface, the multiprocessing launcher on Relay's spawn launcher, helpers (impl/fabric_launchers.py)
    **_each("strategies.launchers.launcher", "fabric_launchers", "_Launcher"),
    **_each("strategies.launchers.multiprocessing", "fabric_launchers",
            "_MultiProcessingLauncher _check_bad_cuda_fork _check_missing_main_guard _disable_module_memory_sharing"),
    **_each("strategies.launchers.subprocess_script", "fabric_launchers", "_basic_subprocess_cmd _hydra_subprocess_cmd"),
    # strategy helpers (impl/fabric_strategies.py)
    **_each("strategies.strategy", "fabric_strategies",
            "_BackwardSyncControl _Sharded _apply_filter _validate_keys_for_strict_loading"),
    **_each("strategies.ddp", "fabric_strategies", "_DDPBackwardSyncControl"),
    **_each("strategies.fsdp", "fabric_strategies",
            "_FSDPBackwardSyncControl _get_full_state_dict_context _get_sharded_state_dict_context "
            "_is_sharded_checkpoint _is_full_checkpoint _has_fsdp_modules"),
    **_each("strategies.model_parallel", "fabric_strategies",
            "_FSDPNoSync _ParallelBackwardSyncControl _has_dtensor_modules _load_raw_module_state "
            "_load_raw_module_state_from_path _named_parameters_and_buffers_to_load"),
    **_each("utilities.load", "fabric_strategies", "_load_distributed_checkpoint"),
    **_each("utilities.consolidate_checkpoint", "fabric_strategies", "_parse_cli_args _process_cli_args"),
    # engine internals Relay does not run: import everywhere, raise when used (impl/fabric_refused.py)
    **_each("connector", "fabric_refused", "_Connector"),
    **_each("strategies.launchers.subprocess_script", "fabric_refused",
            "_SubprocessScriptLauncher _ChildProcessObserver _launch_process_observer"),
    **_each("cli", "fabric_cli", "_main _run _consolidate main _torchrun_launch"),
    **_each("strategies.xla_fsdp", "fabric_refused", "_XLAFSDPBackwardSyncControl _activation_checkpointing_auto_wrapper"),
    **_each("_graveyard.tpu", "fabric_refused", "_patch_sys_modules _patch_classes"),
    **_each("strategies.launchers.xla", "fabric_refused", "_rank_teardown"),
    **_each("strategies.model_parallel", "fabric_refused", "_save_checkpoint _load_checkpoint"),
    **_each("utilities.load", "fabric_refused", "_LazyLoadingUnpickler"),
}
