"""Writes docs/lightning_api.md from an installed Lightning: every public name and Trainer argument, with its status.

Run ``python docs/make_lightning_api.py > docs/lightning_api.md`` in an environment with ``lightning`` and Relay.
A name is "supported" when Relay serves it at the mirrored path (checked here by importing it); the notes
below give the documented differences and the reasons for what is refused.
"""

from __future__ import annotations

import importlib
import os
import sys

# appended, not first: tests/trainer/ (a test package) must not hide the `trainer` package
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from lightning_api_names import (  # noqa: E402
    MEMBER_CLASSES,
    MODULES,
    defined_names,
    instance_names,
    lightning_members,
    trainer_arguments,
)

from trainer.lightning_compat import relay_module_for  # noqa: E402

FABRIC = "Lightning Fabric is not part of Relay; Relay's Trainer and plugins cover the same ground"
XLA = "TPUs/XLA: no XLA backend in Relay"
DEEPSPEED = "DeepSpeed precision is the ordinary `precision=` argument with strategy='deepspeed'"
BATCH_SIZE_FINDER = ("difference", "Lightning's arguments plus `max_memory_bytes` (or `RELAY_TUNER_MAX_MEMORY`, e.g. "
                     "`512MB`): on a CPU, where there is no out-of-memory error, a trial over that many bytes of "
                     "tensors fails as one would on a GPU")
CLOUD = "uploads to a third-party service; log with TensorBoardLogger/CSVLogger or subclass trainer.loggers.Logger"

# (module, name) or name -> (status, note). status: "difference" (accepted, behaves differently) or "refused".
NOTES: dict[str, tuple[str, str]] = {
    "lightning.pytorch:LightningModule": ("supported", "the same class as `trainer.Module`"),
    "lightning.pytorch:LightningDataModule": ("supported", "the same class as `trainer.DataModule`"),
    "lightning.pytorch.core:LightningModule": ("supported", "the same class as `trainer.Module`"),
    "lightning.pytorch.core:LightningDataModule": ("supported", "the same class as `trainer.DataModule`"),
    "BackboneFinetuning": ("refused", "not implemented; freeze/unfreeze in `on_train_epoch_start`"),
    "BaseFinetuning": ("refused", "not implemented; freeze/unfreeze in `on_train_epoch_start`"),
    "BasePredictionWriter": ("refused", "not implemented; write predictions in `on_predict_batch_end`"),
    "BatchSizeFinder": BATCH_SIZE_FINDER,
    "lightning.pytorch.tuner:Tuner": ("difference", "`scale_batch_size` also takes `max_memory_bytes` (see "
                                                    "BatchSizeFinder); `lr_find` as in Lightning"),
    "ModelPruning": ("refused", "not implemented; use torch.nn.utils.prune in a callback"),
    "OnExceptionCheckpoint": ("refused", "not implemented; `on_exception` + `trainer.save_checkpoint`"),
    "StochasticWeightAveraging": ("refused", "not implemented; torch.optim.swa_utils in a callback"),
    "EMAWeightAveraging": ("refused", "not implemented; torch.optim.swa_utils.AveragedModel in a callback"),
    "WeightAveraging": ("refused", "not implemented; torch.optim.swa_utils.AveragedModel in a callback"),
    "SpikeDetection": ("refused", "not implemented; Relay's NaN/inf checks are the fault-handling issue's"),
    "lightning.pytorch.trainer.states:LightningEnum": ("refused", "import it from `trainer.utilities` "
                                                                  "(Lightning's `lightning.pytorch.utilities`)"),
    "lightning.pytorch.trainer.states:*": ("planned", "issue 11, 'compat-behaviour' branch (`trainer.states`)"),
    "Timer": ("refused", "not implemented; `Trainer(max_time=...)` stops a run on time"),
    "RichProgressBar": ("difference", "draws Relay's one-line bar through a rich console (theme styles); "
                                      "`refresh_rate` 0 turns it off, otherwise redraws are time based; needs "
                                      "`pip install 'relaytrain[rich]'`"),
    "RichModelSummary": ("difference", "same rows as ModelSummary in a rich table; needs `relaytrain[rich]`"),
    "TQDMProgressBar": ("difference", "Relay's own bar (no tqdm); `refresh_rate` 0 turns it off, otherwise "
                                      "redraws are time based"),
    "ProgressBar": ("difference", "Relay's bar; `refresh_rate` is seconds between redraws, not batches"),
    "LitLogger": ("refused", CLOUD),
    "CometLogger": ("refused", CLOUD),
    "MLFlowLogger": ("refused", CLOUD),
    "WandbLogger": ("refused", CLOUD),
    "CombinedLoader": ("refused", "not implemented; pass a list of loaders to validate/test/predict"),
    "find_shared_parameters": ("refused", XLA),
    "set_shared_parameters": ("refused", XLA),
    "is_shared_filesystem": ("refused", "not implemented; Relay writes files from rank 0 only"),
    "measure_flops": ("refused", "not implemented; use torch.utils.flop_counter.FlopCounterMode"),
    "LightningLSTM": ("refused", "not provided; the demos are BoringModel, DemoModel, Transformer"),
    "SimpleLSTM": ("refused", "not provided; the demos are BoringModel, DemoModel, Transformer"),
    "SequenceSampler": ("refused", "not provided (it belongs to the LSTM demo)"),
    "WikiText2": ("difference", "reads `<data_dir>/wikitext-2/train.txt` and never downloads; a missing file "
                                "is a FileNotFoundError naming the path"),
    "DeepSpeedStrategy": ("difference", "Relay's ZeRO strategy (extra `relaytrain[deepspeed]`): `stage`, "
                                        "`offload_optimizer`, `offload_parameters`, `config` as in Lightning; Lightning's other "
                                        "keyword arguments are not taken: put those DeepSpeed settings in `config`"),
    "XLAAccelerator": ("refused", XLA),
    "find_usable_cuda_devices": ("refused", "not implemented; pass `devices=[i, j]`"),
    "AsyncCheckpointIO": ("refused", "not implemented; checkpoints are written atomically by the strategy"),
    "CheckpointIO": ("refused", "not pluggable; checkpoint I/O belongs to the strategy"),
    "TorchCheckpointIO": ("refused", "not pluggable; checkpoint I/O belongs to the strategy"),
    "XLACheckpointIO": ("refused", XLA),
    "BitsandbytesPrecision": ("refused", "not implemented (bitsandbytes quantization)"),
    "DeepSpeedPrecision": ("refused", DEEPSPEED),
    "TransformerEnginePrecision": ("refused", "not implemented (NVIDIA Transformer Engine)"),
    "FSDPPrecision": ("refused", "FSDP takes the ordinary `precision=` argument"),
    "XLAPrecision": ("refused", XLA),
    "LayerSync": ("refused", "use `Trainer(sync_batchnorm=True)`"),
    "TorchSyncBatchNorm": ("refused", "use `Trainer(sync_batchnorm=True)`"),
    "MixedPrecision": ("difference", "constructor is `MixedPrecision(precision, device_type)`"),
    "XLAProfiler": ("refused", XLA),
    "LSFEnvironment": ("refused", "not implemented; SLURM, MPI, torchrun and Kubernetes are"),
    "XLAEnvironment": ("refused", XLA),
    "KubeflowEnvironment": ("supported", "the same class as `KubernetesEnvironment`"),
    "LightningEnvironment": ("supported", "the same class as `LocalEnvironment`"),
    "LightningDeprecationWarning": ("supported", ""),
    "rank_zero_module": ("refused", "internal logger object; use `rank_zero_info` / `rank_zero_debug`"),
    "get_torchvision_model": ("refused", "internal helper; call torchvision directly"),
    "SIGTERMException": ("difference", "defined (a SystemExit) but Relay does not raise it; SIGTERM handling is "
                                       "the launcher's"),
    "GradClipAlgorithmType": ("supported", ""),
}
TRAINER_ARGS: dict[str, tuple[str, str]] = {
    "precision": ("difference", "default `\"32-true\"` (Lightning: None, meaning 32-true); `transformer-engine*` "
                                "values are refused"),
    "logger": ("supported", "also an OmegaConf ListConfig, as `hydra.utils.instantiate` passes it; default "
                            "directory `relay_logs/` (`lightning_logs/` in compatibility mode)"),
    "val_check_interval": ("difference", "an int or float; time-based values (str, timedelta, dict) are refused"),
    "benchmark": ("supported", "sets `torch.backends.cudnn.benchmark` when not None"),
    "inference_mode": ("difference", "accepted and stored; evaluation runs in the strategy's evaluation context"),
    "use_distributed_sampler": ("supported", "False: every rank reads the loaders as given"),
    "overfit_batches": ("planned", "issue 11, 'compat-behaviour' branch"),
    "reload_dataloaders_every_n_epochs": ("planned", "issue 11, 'compat-behaviour' branch"),
    "barebones": ("difference", "True turns off logger, checkpointing, progress bar and model summary"),
    "plugins": ("difference", "one ClusterEnvironment; precision, checkpoint I/O and layer-sync plugins are refused"),
    "sync_batchnorm": ("supported", "BatchNorm layers become SyncBatchNorm when more than one process trains"),
    "enable_autolog_hparams": ("supported", ""),
    "model_registry": ("refused", CLOUD + "; only None is accepted"),
}


# "Class.member" -> (status, note) for the members of LightningModule, LightningDataModule, Trainer and Callback
_LOADERS = ("the loader the loops iterate: a plain `DataLoader` comes back rebuilt with Relay's resumable sampler "
            "(same dataset, batch size and per-process length), so it is not the object passed in (Lightning: the "
            "same object, except for prediction)")
_HPARAMS_TYPE = ("written, as in Lightning, only for one OmegaConf config saved with `save_hyperparameters(cfg)`, "
                 "but as the name `\"DictConfig\"`, not the class (checkpoints hold plain data); "
                 "`load_from_checkpoint` rebuilds the `DictConfig`")
MEMBERS: dict[str, tuple[str, str]] = {
    "Trainer.init_module": ("difference", "with FSDP the model is built on the CPU in the precision's dtype (on the "
                                          "meta device with `empty_init=True`) and sharded when fit sets it up; with "
                                          "DeepSpeed it is built on the device in the precision's dtype (no ZeRO-3 "
                                          "partitioned construction)"),
    "Trainer.received_sigterm": ("difference", "True once SIGTERM arrived during `fit` (SIGTERM is in "
                                               "`preemption_signals`, the default); Relay then finishes the step, "
                                               "writes `last.ckpt` and exits with 143 (`Preempted`, a SystemExit) "
                                               "where Lightning raises `SIGTERMException`; not caught during "
                                               "validate/test/predict"),
    "LightningModule.dtype": ("difference", "read from the module's first floating-point parameter (else buffer), so "
                                            "`.bfloat16()` and precision casts show; without floating-point tensors "
                                            "`torch.get_default_dtype()` (Lightning tracks the last `.to()` and "
                                            "ignores `.bfloat16()`)"),
    "LightningModule.all_gather": ("difference", "on one process the data come back unchanged whatever the strategy "
                                                 "(Lightning's DDP with one process adds a dimension of size 1); "
                                                 "`group=` is not supported under horovod"),
    "LightningModule.fabric": ("difference", "always None: Relay has no Fabric; setting it to anything else raises "
                                             "`TypeError`"),
    "LightningModule.CHECKPOINT_HYPER_PARAMS_TYPE": ("difference", _HPARAMS_TYPE),
    "LightningDataModule.CHECKPOINT_HYPER_PARAMS_TYPE": ("difference", _HPARAMS_TYPE),
    "LightningDataModule.load_from_checkpoint": ("difference", "the DataModule's state is read from the checkpoint's "
                                                               "`datamodule` key (Lightning: its qualified class "
                                                               "name); `hparams_file` is refused"),
    "LightningDataModule.from_datasets": ("difference", "`pin_memory` only when CUDA is available (Lightning: "
                                                        "always True)"),
    "LightningModule.to_onnx": ("refused", "needs `onnx`/`onnxscript`, which Relay's CI does not install, so a "
                                           "wrapper would go untested; call `torch.onnx.export(model.eval(), "
                                           "(example_input,), \"model.onnx\")`"),
    "LightningModule.to_tensorrt": ("refused", "needs `torch_tensorrt` and a CUDA GPU; call "
                                               "`torch_tensorrt.compile(model, inputs=[...])`"),
    "Trainer.validate_loop": ("refused", "Relay's evaluation runs are functions, not loop objects; read "
                                         "`trainer.num_val_batches` and use the `on_validation_*` hooks"),
    "Trainer.test_loop": ("refused", "Relay's evaluation runs are functions, not loop objects; read "
                                     "`trainer.num_test_batches` and use the `on_test_*` hooks"),
    "Trainer.train_dataloader": ("difference", _LOADERS),
    "Trainer.val_dataloaders": ("difference", _LOADERS),
    "Trainer.test_dataloaders": ("difference", _LOADERS),
    "Trainer.predict_dataloaders": ("difference", _LOADERS + "; a prediction loader keeps its `batch_size` "
                                                             "(Lightning's shows None)"),
}


def member_rows(cls_name: str) -> list[tuple[str, str, str, str]]:
    relay_cls = MEMBER_CLASSES[cls_name]
    present = instance_names("relay", cls_name)
    out = []
    for name in lightning_members(cls_name):
        status, text = MEMBERS.get(f"{cls_name}.{name}") or (("supported", "") if name in present
                                                               else ("refused", "not implemented"))
        if status == "refused" and name in present:
            raise SystemExit(f"{cls_name}.{name} is marked refused but Relay's {relay_cls} has it: update MEMBERS")
        if status in ("supported", "difference") and name not in present:
            raise SystemExit(f"{cls_name}.{name} is marked {status} but Relay's {relay_cls} lacks it")
        out.append((name, status, f"`trainer.{relay_cls}.{name}`" if name in present else "", text))
    return out


def _importable(relay_module: str | None, name: str) -> bool:
    if relay_module is None:
        return False
    try:
        getattr(importlib.import_module(relay_module), name)
    except (ImportError, AttributeError):
        return False
    return True


def rows(module: str) -> list[tuple[str, str, str, str]]:
    relay = relay_module_for(module)
    out = []
    for name in defined_names(module):
        note = NOTES.get(f"{module}:{name}") or NOTES.get(f"{module}:*") or NOTES.get(name)
        present = _importable(relay, name)
        if note is None:
            status, text = ("supported", "") if present else ("refused", "not implemented")
        else:
            status, text = note
        if status == "planned" and present:
            status, text = "supported", ""
        if status == "refused" and present:
            raise SystemExit(f"{module}.{name} is marked refused but {relay}.{name} exists: update NOTES")
        if status in ("supported", "difference") and not present:
            raise SystemExit(f"{module}.{name} is marked {status} but {relay}.{name} cannot be imported")
        out.append((name, status, f"`{relay}.{name}`" if present else "", text))
    return out


def main() -> None:
    import lightning

    print("# Lightning's public API in Relay\n")
    print(f"Made from Lightning {lightning.__version__} by `python docs/make_lightning_api.py` "
          "(every name in the `__all__` of the modules below, or for a module without one the names it defines; "
          "every `Trainer` argument). `tests/test_lightning_api_table.py` checks that the table lists every such "
          "name and that every *supported* row imports from Relay at the path given.\n")
    print("Statuses: **supported** (same name, same use), **difference** (accepted; the note says what differs), "
          "**refused** (not provided; the note says why and what to use), **planned** (another open branch of "
          "issue 11 adds it).\n")
    print("Porting by hand: replace `lightning.pytorch` (or `pytorch_lightning`) by `trainer` in imports. Running "
          "unmodified: `python -m trainer.lightning_compat script.py` serves these paths under Lightning's own "
          "names; anything refused here fails there with one line naming it. There, `lightning.__version__` (and "
          "`pytorch_lightning.__version__`) reads the Lightning version this table describes, so version checks in "
          "user code pass; `trainer.__version__` is Relay's.\n")
    print(f"Not covered by this table: {FABRIC}; "
          "`LightningCLI` (Relay's CLI is Hydra: `python -m trainer`); `lightning.pytorch.loops` internals.\n")
    for module in MODULES:
        print(f"## `{module}` → `{relay_module_for(module)}`\n")
        print("| name | status | in Relay | note |\n|---|---|---|---|")
        for name, status, where, note in rows(module):
            print(f"| `{name}` | {status} | {where} | {note} |")
        print()
    for cls_name, relay_cls in MEMBER_CLASSES.items():
        what = "minus those every `torch.nn.Module` has" if cls_name == "LightningModule" else ""
        print(f"## `{cls_name}` members → `trainer.{relay_cls}`\n")
        print(f"Public methods, properties and attributes of a `{cls_name}` instance{' ' + what if what else ''}.\n")
        print("| name | status | in Relay | note |\n|---|---|---|---|")
        for name, status, where, note in member_rows(cls_name):
            print(f"| `{name}` | {status} | {where} | {note} |")
        print()
    print("## `Trainer` arguments\n")
    import inspect

    from trainer import Trainer

    relay_args = set(inspect.signature(Trainer.__init__).parameters)
    print("| argument | status | note |\n|---|---|---|")
    for arg in trainer_arguments():
        status, note = TRAINER_ARGS.get(arg, ("supported" if arg in relay_args else "refused", ""))
        if status == "planned" and arg in relay_args:
            status, note = "supported", ""
        if status in ("supported", "difference") and arg not in relay_args:
            raise SystemExit(f"Trainer({arg}=...) is marked {status} but Relay's Trainer does not take it")
        print(f"| `{arg}` | {status} | {note} |")


if __name__ == "__main__":
    main()
