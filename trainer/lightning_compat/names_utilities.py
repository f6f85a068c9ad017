"""Lightning names served one at a time, like ``names.NAMES``: rest of `lightning.pytorch` (utilities, callbacks, loggers, profilers, accelerators, cli, demos) (merged into ``names.NAMES``)."""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"

_MIGRATIONS = ("_migration_index", "_migrate_model_checkpoint_early_stopping", "_get_fit_loop_initial_state_1_6_0",
               "_migrate_loop_global_step_to_progress_tracking", "_migrate_loop_current_epoch_to_progress_tracking",
               "_migrate_loop_batches_that_stepped", "_migrate_model_checkpoint_save_on_train_epoch_end_default",
               "_drop_apex_amp_state", "_migrate_loop_structure_after_tbptt_removal",
               "_migrate_loop_structure_after_optimizer_loop_removal",
               "_migrate_loop_structure_after_dataloader_loop_removal")
_MIGRATION_UTILS = ("migrate_checkpoint", "pl_legacy_patch", "_pl_migrate_checkpoint", "_get_version", "_set_version",
                    "_set_legacy_version", "_should_upgrade", "_RedirectingUnpickler",
                    "_patch_pl_to_mirror_if_necessary", "_migration_index")

NAMES: dict[str, str] = {
    # checkpoint migration (old Lightning / pytorch_lightning checkpoints)
    **{f"{_P}.utilities.migration.migration:{n}": f"{_IMPL}.utils_migration:{n}" for n in _MIGRATIONS},
    **{f"{_P}.utilities.migration.utils:{n}": f"{_IMPL}.utils_migration:{n}" for n in _MIGRATION_UTILS},
    **{f"{_P}.utilities.upgrade_checkpoint:{n}": f"{_IMPL}.utils_migration:{n}"
       for n in ("main", "_upgrade", "migrate_checkpoint", "pl_legacy_patch")},
    f"{_P}.utilities.upgrade_checkpoint:torch": "torch",
    **{f"{_P}.core.saving:{n}": f"{_IMPL}.utils_migration:{n}" for n in ("_pl_migrate_checkpoint", "pl_legacy_patch")},
    f"{_P}._graveyard._torchmetrics:_patch_pl_to_mirror_if_necessary": f"{_IMPL}.utils_migration:_patch_pl_to_mirror_if_necessary",
}
_DATA = ("has_len_all_ranks", "_update_dataloader", "_get_dataloader_init_args_and_kwargs",
         "_dataloader_init_kwargs_resolve_sampler")
_PARSING = ("clean_namespace", "parse_class_init_keys", "get_init_args", "_get_init_args", "collect_init_args",
            "save_hyperparameters", "_lightning_get_all_attr_holders", "_lightning_get_first_attr_holder")
_MODEL_HELPERS = ("_ModuleMode", "get_torchvision_model", "_check_mixed_imports", "_restricted_classmethod",
                  "_restricted_classmethod_impl")
_COMPILE = ("from_compiled", "to_uncompiled", "_maybe_unwrap_optimized", "_check_mixed_imports")
_PYTREE = ("_tree_flatten", "tree_unflatten", "_map_and_unflatten", "_is_leaf_or_primitive_container")

NAMES.update({
    **{f"{_P}.utilities.data:{n}": f"{_IMPL}.utils_data:{n}" for n in _DATA},
    **{f"{_P}.utilities.parsing:{n}": f"{_IMPL}.utils_parsing:{n}" for n in _PARSING},
    **{f"{_P}.core.saving:{n}": f"{_IMPL}.utils_parsing:{n}" for n in ("parse_class_init_keys",)},
    **{f"{_P}.core.mixins.hparams_mixin:{n}": f"{_IMPL}.utils_parsing:{n}" for n in ("save_hyperparameters",)},
    **{f"{_P}.utilities.model_helpers:{n}": f"{_IMPL}.utils_helpers:{n}" for n in _MODEL_HELPERS},
    f"{_P}.utilities.model_summary.model_summary:_ModuleMode": f"{_IMPL}.utils_helpers:_ModuleMode",
    f"{_P}.core.datamodule:_restricted_classmethod": f"{_IMPL}.utils_helpers:_restricted_classmethod",
    **{f"{_P}.utilities.compile:{n}": f"{_IMPL}.utils_helpers:{n}" for n in _COMPILE},
    **{f"{_P}.utilities._pytree:{n}": f"{_IMPL}.utils_helpers:{n}" for n in _PYTREE},
    **{f"{_P}.utilities.combined_loader:{n}": f"{_IMPL}.utils_helpers:{n}" for n in ("_tree_flatten", "_map_and_unflatten")},
    f"{_P}.utilities.exceptions:_augment_message": f"{_IMPL}.utils_helpers:_augment_message",
    f"{_P}.utilities.consolidate_checkpoint:_format_checkpoint": f"{_IMPL}.utils_helpers:_format_checkpoint",
    # callbacks, loggers, profilers, accelerators
    **{f"{_P}.callbacks.progress.tqdm_progress:{n}": f"trainer.callbacks.tqdm_progress:{n}" for n in ("Tqdm", "_update_n")},
    f"{_P}.callbacks.device_stats_monitor:_prefix_metric_keys": f"{_IMPL}.utils_callbacks:_prefix_metric_keys",
    **{f"{_P}.accelerators.cuda:{n}": f"{_IMPL}.utils_callbacks:{n}" for n in ("get_nvidia_gpu_stats", "_get_gpu_id")},
    f"{_P}.loggers.tensorboard:_TENSORBOARD_AVAILABLE": f"{_IMPL}.utils_callbacks:_TENSORBOARD_AVAILABLE",
    f"{_P}.loggers.utilities:_scan_checkpoints": f"{_IMPL}.utils_callbacks:_scan_checkpoints",
    f"{_P}.loggers.mlflow:_get_resolve_tags": f"{_IMPL}.utils_callbacks:_get_resolve_tags",
    f"{_P}.profilers.pytorch:RegisterRecordFunction": f"{_IMPL}.utils_callbacks:RegisterRecordFunction",
    # rule 3: Lightning's DeepSpeed checkpoint layout and ZeRO-3 summaries
    **{f"{_P}.utilities.deepspeed:{n}": f"{_IMPL}.utils_refused:{n}"
       for n in ("convert_zero_checkpoint_to_fp32_state_dict", "ds_checkpoint_dir", "_remove_prefix")},
    **{f"{_P}.utilities.model_summary.model_summary_deepspeed:{n}": f"{_IMPL}.utils_refused:{n}"
       for n in ("DeepSpeedSummary", "DeepSpeedLayerSummary", "deepspeed_param_size")},
    f"{_P}.callbacks.model_summary:DeepSpeedSummary": f"{_IMPL}.utils_refused:DeepSpeedSummary",
})

_EXTRAS = {
    "core.saving": ("_default_map_location", "_is_imported_subclass", "_convert_loaded_hparams", "_load_from_checkpoint",
                    "_load_state"),
    "loggers.utilities": ("_log_hyperparams",),
    "loggers.litlogger": ("_create_experiment_name",),
    "core.mixins.hparams_mixin": ("_given_hyperparameters_context",),
    "cli": ("_class_path_from_class", "_global_add_class_path", "_add_class_path_generator", "_get_short_description",
            "_get_module_type", "_set_dict_nested"),
    "utilities.argparse": ("_parse_env_variables", "_defaults_from_env_vars"),
    "utilities.compile": ("_verify_strategy_supports_compile",),
    "utilities.imports": ("_try_import_module",),
    "utilities.types": ("_SizedIterable",),
    "utilities.model_summary.model_summary": ("_format_summary_table", "_tensor_has_shape"),
    "callbacks.pruning": ("_LayerRef",),
    "callbacks.throughput_monitor": ("_plugin_to_compute_dtype",),
    "accelerators.mps": ("get_device_stats",),
    "profilers.pytorch": ("_default_sort_by_key",),
    "_graveyard._torchmetrics": ("compare_version",),
    "utilities.model_registry": ("_is_registry", "_parse_registry_model_version", "_determine_model_name",
                                 "_determine_model_folder", "find_model_local_ckpt_path",
                                 "download_model_from_registry"),
}
NAMES.update({f"{_P}.{module}:{n}": f"{_IMPL}.utils_extras:{n}" for module, names in _EXTRAS.items() for n in names})
NAMES.update({f"{_P}.profilers.pytorch:ScheduleWrapper": f"{_IMPL}.utils_refused:ScheduleWrapper",
              f"{_P}.cli:_InstantiatorFn": f"{_IMPL}.utils_refused:_InstantiatorFn"})
NAMES.update({f"{_P}.callbacks.progress.rich_progress:{n}": f"trainer.callbacks.rich_columns:{n}"
              for n in ("CustomBarColumn", "CustomInfiniteTask", "_RefreshThread", "CustomProgress", "CustomTimeColumn",
                        "BatchesProcessedColumn", "ProcessingSpeedColumn", "MetricsTextColumn")})
# the rich names Lightning's module imports (tests patch ``rich_progress.Progress.update`` through it)
NAMES.update({f"{_P}.callbacks.progress.rich_progress:{n}": f"{module}:{n}"
              for module, names in (("rich", ("get_console", "reconfigure")), ("rich.console", ("Console", "RenderableType")),
                                    ("rich.progress", ("BarColumn", "Progress", "ProgressColumn", "Task", "TaskID",
                                                       "TextColumn")),
                                    ("rich.style", ("Style",)), ("rich.text", ("Text",))) for n in names})
NAMES.update({f"{_P}._graveyard.{module}:{name}": f"{_IMPL}.utils_refused:_{module}{name}"
              for module, name in (("hpu", "_patch_classes"), ("hpu", "_patch_sys_modules"), ("tpu", "_patch_classes"),
                                   ("tpu", "_patch_sys_modules"), ("precision", "_patch_classes"),
                                   ("precision", "_patch_sys_modules"), ("precision", "_create_class"))})
