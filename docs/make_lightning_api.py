"""Writes docs/lightning_api.md: Lightning's surface as Relay serves it, from the walk of Lightning itself.

``python docs/make_lightning_api.py > docs/lightning_api.md`` (no Lightning needed: the surface is the data file
``trainer/lightning_compat/surface/lightning-<version>.json``); ``python docs/make_lightning_api.py --walk``
first rewrites that file from the installed Lightning (so a new release shows as a diff of it), then the page.
The counts come from ``python -m trainer.lightning_compat.surface.check --json``, run in a fresh interpreter in
the zero-edit mode; every finding must be covered by one of the allowed exceptions
(``trainer/lightning_compat/surface/exceptions.py``), which the page lists with their reasons and tests.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# the repository root, not tests/ (whose tests/trainer/ package would shadow Relay's `trainer`)
sys.path.insert(0, ROOT)

from trainer.lightning_compat import surface
from trainer.lightning_compat.surface.exceptions import ALLOWED

FABRIC = ("Fabric's own members: `trainer.fabric.Fabric` has Lightning Fabric's methods and properties, tested "
          "differentially in tests/compat/test_fabric_diff.py")
XLA = ("TPUs/XLA: Relay has no XLA backend (torch_xla needs TPU hardware nobody here can test on); run on "
       "CUDA, ROCm or XPU GPUs or the CPU with accelerator='auto'")
DEEPSPEED = ("a precision object for DeepSpeed is redundant in Relay: strategy='deepspeed' with `precision='bf16-mixed'` "
             "(or '16-mixed') writes DeepSpeed's fp16/bf16 config")
FINETUNING = ("also saves which parameters are frozen, so a fit resumed after the unfreezing epoch continues exactly "
              "(Lightning 2.6.6 resumes with those modules frozen again); under DDP it averages the gradients of "
              "parameters unfrozen after DDP was built, which DDP does not (Lightning issue #20340)")
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
    "BackboneFinetuning": ("difference", FINETUNING),
    "BaseFinetuning": ("difference", FINETUNING),
    "BatchSizeFinder": BATCH_SIZE_FINDER,
    "SpikeDetection": ("difference", "the running mean of the last `window` losses is Relay's own (no torchmetrics): "
                                     "its checkpoint state holds `window`/`recent` in place of torchmetrics' "
                                     "`running`/`mean`, and loads back (Lightning 2.6.6's `load_state_dict` fails); "
                                     "with the callback present Relay does not stop on a non-finite loss itself"),
    "lightning.pytorch.tuner:Tuner": ("difference", "`scale_batch_size` also takes `max_memory_bytes` (see "
                                                    "BatchSizeFinder); `lr_find` as in Lightning"),
    "RichProgressBar": ("difference", "draws Relay's one-line bar through a rich console (theme styles); "
                                      "`refresh_rate` 0 turns it off, otherwise redraws are time based; needs "
                                      "`pip install 'relaytrain[rich]'`"),
    "RichModelSummary": ("difference", "same rows as ModelSummary in a rich table; needs `relaytrain[rich]`"),
    "TQDMProgressBar": ("difference", "Relay's own bar (no tqdm); `refresh_rate` 0 turns it off, otherwise "
                                      "redraws are time based"),
    "ProgressBar": ("difference", "Relay's bar; `refresh_rate` is seconds between redraws, not batches"),
    "LitLogger": ("supported", "drives the `litlogger` package (`pip install litlogger`: Lightning AI's cloud, no "
                               "offline mode; CI tests it against a stand-in `litlogger` module)"),
    "CometLogger": ("supported", "needs `pip install 'relaytrain[comet]'`; offline runs (`COMET_START_ONLINE=0`) "
                                 "are archived for `comet upload`"),
    "MLFlowLogger": ("difference", "needs `pip install 'relaytrain[mlflow]'`; also takes `checkpoint_path_prefix` "
                                   "(in Lightning's docs, not in its 2.6.6 class); `trainer.log_dir` with a non-local "
                                   "store (a server, SQLite) is `default_root_dir` where Lightning gives None"),
    "WandbLogger": ("difference", "needs `pip install 'relaytrain[wandb]'`; `offline=True` starts this run offline "
                                  "(`wandb.init(mode='offline')`) instead of setting WANDB_MODE for the whole process"),
    "lightning.fabric:Fabric": ("difference", "Lightning Fabric's API on Relay's plugins; `launch()` in a plain "
                                              "`python` run starts every rank as a new process and the launching "
                                              "process exits with their exit code (Lightning: it becomes rank 0); "
                                              "strategy='pipeline' is refused in one line (its schedule needs the "
                                              "Trainer's loop); strategy='deepspeed' drives one engine per Fabric "
                                              "(Lightning: one per model), and `setup_module` alone places the model "
                                              "without an engine (Lightning: an inference engine); FSDP is FSDP2 "
                                              "(`fully_shard`)"),
    "lightning.fabric.plugins:CheckpointIO": ("difference", "Relay's checkpoint I/O object: Lightning's "
                                                            "`save_checkpoint`/`load_checkpoint`/`remove_checkpoint`/"
                                                            "`teardown`, writes atomic, loading data only unless the "
                                                            "caller passes `weights_only=False`"),
    "lightning.fabric.accelerators:XLAAccelerator": ("difference", "never available: `is_available()` is False and "
                                                                   "`auto_device_count()` 0; constructing one raises "
                                                                   "Lightning's `ModuleNotFoundError` without torch_xla "
                                                                   "(with torch_xla: a RuntimeError, Relay has no "
                                                                   "XLA backend)"),
    "DataParallelStrategy": ("refused", "torch's `DataParallel` (one process driving several GPUs by threads) is "
                                       "discouraged by PyTorch itself in favour of DDP, and Lightning's Trainer dropped "
                                       "it in 2.0; use strategy='ddp' with the same devices"),
    "XLAStrategy": ("refused", XLA),
    "XLAFSDPStrategy": ("refused", XLA),
    "SingleDeviceXLAStrategy": ("refused", XLA),
    "WikiText2": ("difference", "reads `<data_dir>/wikitext-2/train.txt` and never downloads; a missing file "
                                "is a FileNotFoundError naming the path"),
    "DeepSpeedStrategy": ("difference", "Relay's ZeRO strategy (extra `relaytrain[deepspeed]`) with Lightning's "
                                        "arguments and their DeepSpeed config; also runs on the CPU (gloo), where "
                                        "Lightning refuses any accelerator but CUDA; `timeout` defaults to 300 s "
                                        "(Lightning: 30 min); Relay's Trainer and Fabric build the engine in "
                                        "`setup_optimizers`, so `setup_module` alone builds none"),
    "XLAAccelerator": ("refused", XLA),
    "AsyncCheckpointIO": ("difference", "`Trainer(plugins=[AsyncCheckpointIO()])`; tensors go to reused CPU buffers "
                                        "(parameters and optimizer state while the next step runs), one save in "
                                        "flight, removals queued behind writes, files still atomic; its "
                                        "`teardown` also tears down the wrapped plugin"),
    "CheckpointIO": ("difference", "`Trainer(plugins=[MyIO()])`; the strategy hands `save_checkpoint` a temporary "
                                   "path and renames the finished file, so a plugin's writes stay atomic; loading "
                                   "is data only unless the caller passes `weights_only=False`"),
    "TorchCheckpointIO": ("difference", "atomic (temporary, fsync, rename); paths may be fsspec URLs; "
                                        "`load_checkpoint` reads data only unless `weights_only=False`"),
    "XLACheckpointIO": ("refused", XLA),
    "BitsandbytesPrecision": ("refused", "needs the bitsandbytes CUDA library on an NVIDIA GPU, which Relay's CI "
                                        "cannot exercise; replace layers with `bitsandbytes.nn.Linear8bitLt`/"
                                        "`Linear4bit` in `configure_model`"),
    "DeepSpeedPrecision": ("refused", DEEPSPEED),
    "TransformerEnginePrecision": ("refused", "needs NVIDIA Transformer Engine and an FP8-capable GPU (Hopper/Ada), "
                                             "which Relay's CI cannot exercise; use `te.fp8_autocast()` around "
                                             "your forward, or precision='bf16-mixed'"),
    "FSDPPrecision": ("refused", "a precision object for FSDP is redundant in Relay: "
                                "strategy='fsdp' with `precision='bf16-mixed'` (or '16-mixed', 'bf16-true') sets "
                                "FSDP's mixed-precision policy"),
    "XLAPrecision": ("refused", XLA),
    "MixedPrecision": ("difference", "constructor is `MixedPrecision(precision, device_type)`"),
    "XLAProfiler": ("refused", XLA),
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
    "LightningModule.fabric": ("difference", "always None: a Relay Module is not attached to a Fabric (a Fabric loop "
                                             "calls its methods itself); setting it to anything else raises "
                                             "`TypeError`"),
    "LightningModule.CHECKPOINT_HYPER_PARAMS_TYPE": ("difference", _HPARAMS_TYPE),
    "LightningDataModule.CHECKPOINT_HYPER_PARAMS_TYPE": ("difference", _HPARAMS_TYPE),
    "LightningDataModule.load_from_checkpoint": ("difference", "the DataModule's state is read from the checkpoint's "
                                                               "`datamodule` key (Lightning: its qualified class "
                                                               "name)"),
    "LightningDataModule.from_datasets": ("difference", "`pin_memory` only when CUDA is available (Lightning: "
                                                        "always True)"),
    "LightningModule.to_tensorrt": ("refused", "needs `torch_tensorrt` (NVIDIA's TensorRT) and a CUDA GPU, which Relay's "
                                               "CI cannot exercise; call "
                                               "`torch_tensorrt.compile(model, inputs=[...])`"),
    "Trainer.train_dataloader": ("difference", _LOADERS),
    "Trainer.val_dataloaders": ("difference", _LOADERS),
    "Trainer.test_dataloaders": ("difference", _LOADERS),
    "Trainer.predict_dataloaders": ("difference", _LOADERS + "; a prediction loader keeps its `batch_size` "
                                                             "(Lightning's shows None)"),
}


def trainer_argument_rows(lightning_args: dict[str, object], arguments: type | None = None) -> list[tuple[str, str, str]]:
    """``(argument, status, note)`` for each of Lightning's Trainer arguments (``{name: Lightning's default}``), from
    the fields of ``TrainerArguments``; a Lightning default that is not the one the field records stops the script."""
    import dataclasses

    from trainer.arguments.trainer_arguments import SAME, TrainerArguments, spec_of

    by_lightning_name = {spec_of(f).lightning or f.name: f for f in dataclasses.fields(arguments or TrainerArguments)
                         if spec_of(f).lightning is not None}
    out = []
    for arg, lightning_default in lightning_args.items():
        f = by_lightning_name.get(arg)
        if f is None:
            out.append((arg, "refused", "not implemented"))
            continue
        spec = spec_of(f)
        recorded = f.default if spec.lightning_default is SAME else spec.lightning_default
        if repr(recorded) != repr(lightning_default):
            raise SystemExit(f"Trainer({arg}=...): Lightning's default is {lightning_default!r}, TrainerArguments.{f.name} "
                             f"records {recorded!r}: set its lightning_default")
        notes = [f"Relay's name `{f.name}`"] if f.name != arg else []
        if spec.lightning_default is not SAME:
            notes.append(f"default `{f.default!r}` (Lightning: `{spec.lightning_default!r}`)")
        out.append((arg, spec.status, "; ".join([*notes, spec.note] if spec.note else notes)))
    return out


def relay_only_argument_rows(arguments: type | None = None) -> list[tuple[str, str, str]]:
    """``(argument, default, help)`` for the arguments Lightning's Trainer does not have."""
    import dataclasses

    from trainer.arguments.trainer_arguments import TrainerArguments, spec_of

    return [(f.name, repr(f.default), spec_of(f).help) for f in dataclasses.fields(arguments or TrainerArguments)
            if spec_of(f).lightning is None]




def run_check() -> dict[str, Any]:
    """The zero-edit mode's report (``surface/check.py``), from a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", "trainer.lightning_compat.surface.check", "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout)


def classify(report: dict[str, Any]) -> tuple[dict[int, list[str]], list[str]]:
    """``({index of the allowed exception: [findings]}, [findings no exception covers])``."""
    covered: dict[int, list[str]] = {i: [] for i in range(len(ALLOWED))}
    uncovered = []
    findings = [("names", k) for k in report["names_failed"]] + [("signatures", k) for k in report["signatures_failed"]]
    findings += [("modules", k) for k in report["modules_failed"]]
    findings += [("refused", k) for k in report.get("refused_failed", {})]
    for what, key in findings:
        index = next((i for i, a in enumerate(ALLOWED) if a.what == what and a.covers(key)), None)
        if index is None:
            uncovered.append(f"{what} {key}")
        else:
            covered[index].append(key)
    return covered, uncovered


def stale_patterns(covered: dict[int, list[str]]) -> list[str]:
    """Patterns of the allowed exceptions that no finding they were given matches: each must still be needed."""
    from fnmatch import fnmatchcase

    return [p for i, allowed in enumerate(ALLOWED) for p in allowed.patterns
            if not any(fnmatchcase(key, p) for key in covered[i])]


def lightning_trainer_arguments() -> dict[str, object]:
    """Lightning's Trainer arguments with their defaults, read from the surface data."""
    sig = surface.modules()["lightning.pytorch.trainer.trainer"]["names"]["Trainer"]["signature"]
    return {name: ast.literal_eval(default) for name, kind, default in sig if kind != "VAR_KEYWORD"}


def page(report: dict[str, Any]) -> str:
    covered, uncovered = classify(report)
    if uncovered:
        raise SystemExit("findings no allowed exception covers (fix them, or add an exception with its reason and "
                         "test to trainer/lightning_compat/surface/exceptions.py):\n" + "\n".join(uncovered))
    stale = stale_patterns(covered)
    if stale:
        raise SystemExit(f"patterns of allowed exceptions that cover nothing any more (remove them): {stale}")
    data = surface.load()
    modules = data["modules"]
    own = sum(1 for m in modules.values() for e in m["names"].values() if e["kind"] != "reexport")
    out = ["# Lightning's surface in Relay\n",
           f"Generated by `python docs/make_lightning_api.py > docs/lightning_api.md` from the walk of Lightning "
           f"{data['lightning']} (`trainer/lightning_compat/surface/lightning-{data['lightning']}.json`, written by "
           "`python docs/make_lightning_api.py --walk` from an installed Lightning; a new release shows as a diff of "
           "that file). Checked by `tests/compat/test_lightning_surface.py`.\n",
           "Run a Lightning program unmodified with `python -m trainer.lightning_compat script.py` (or `-m "
           "package.module`): `lightning`, `lightning.pytorch`, `pytorch_lightning`, `lightning.fabric` and "
           "`lightning_fabric` are served by Relay. Or port it: Relay's own names are in `trainer` "
           "(`trainer.Module` is `LightningModule`).\n",
           "## What is served\n",
           f"Every module file of `lightning.pytorch` and `lightning.fabric` ({len(modules)} files), and the "
           f"{len(data.get('module_aliases', {}))} module paths Lightning's `_graveyard` keeps importable "
           "(`lightning.pytorch.accelerators.tpu`...), under each name it has (`lightning.*`, and "
           "`pytorch_lightning.*` or `lightning_fabric.*`), imports. Each module serves the names it *defines*, by this rule (private names included, since real "
           "projects import them): every name in its `__all__`; every name bound at its top level by `def`, "
           "`class` or an assignment (constants, requirement flags, type aliases, loggers); every name it imports "
           "from another Lightning module (a re-export) or publicly from `lightning_utilities`; every class the "
           "`_graveyard` sets on it (`TPUAccelerator`, `PrecisionPlugin`: legacy names, served as the current class "
           "they stand for). Names it imports "
           "from torch or another third party, and imported modules, are not its own. A public function or class "
           "(and each public method a public class defines) has Lightning's signature: the same parameter names "
           "in the same order, kinds and defaults; Relay may add a parameter only where no call to Lightning's "
           "reaches it.\n",
           "A name is Relay's own object where Relay has one (`LightningModule` *is* `trainer.Module`), else a "
           "value derived from Lightning's definition (a `RequirementCache` flag, a version constant, a type "
           "alias), else a small implementation in `trainer/lightning_compat/`. Pieces bound to hardware or a "
           "package that is not installed (XLA/TPU, bitsandbytes, TransformerEngine) exist: their availability "
           "checks answer False and constructing one raises what Lightning raises without the dependency.\n",
           "| | served | in Lightning |\n|---|---|---|",
           f"| module paths importing | {report['modules'] - len(report['modules_failed'])} | {report['modules']} |",
           f"| names resolving (each module's own: {own}, re-exports: {report['names'] - own}) | "
           f"{report['names'] - len(report['names_failed'])} | {report['names']} |",
           f"| public signatures matching | {report['signatures'] - len(report['signatures_failed'])} | "
           f"{report['signatures']} |",
           "",
           "## Allowed exceptions\n",
           "Everything not served, each with its reason and the test that checks it. A name not served raises "
           "`LightningAttributeError` (an `AttributeError`; `from ... import` turns it into an `ImportError`) "
           "naming it, when it is used; its module still imports.\n",
           "| # | what | Lightning names (patterns) | count | reason | test |\n|---|---|---|---|---|---|"]
    for i, allowed in enumerate(ALLOWED):
        patterns = ", ".join(f"`{p}`" for p in allowed.patterns)
        out.append(f"| {i + 1} | {allowed.what} | {patterns} | {len(covered[i])} | {allowed.reason} | "
                   f"`{allowed.test}` |")
    out += ["", "Each exception's findings, as the check reports them (a pattern takes what the ones above it "
            "left):\n"]
    for i, allowed in enumerate(ALLOWED):
        keys = covered[i]
        why = report[f"{allowed.what}_failed"]
        out.append(f"<details markdown=\"1\"><summary>{i + 1}. {allowed.what}: {len(keys)}</summary>\n")
        out += [f"- `{k}`" + (f": {why[k]}" if allowed.what == "signatures" else "") for k in keys]
        out.append("\n</details>\n")
    out += ["", "## Documented behaviour differences\n",
            "Served, accepted with Lightning's signature, and behaving differently in the way the note says.\n",
            "| name | note |\n|---|---|"]
    for key, (status, note) in NOTES.items():
        if status == "difference":
            out.append(f"| `{key}` | {note} |")
    for key, (status, note) in MEMBERS.items():
        if status == "difference":
            out.append(f"| `{key}` | {note} |")
    out += ["", "## `Trainer` arguments\n",
            "From `trainer.arguments.trainer_arguments.TrainerArguments`, which also makes the Trainer's checks, its Hydra schema "
            "and "
            "`python -m trainer --help`.\n", "| argument | status | note |\n|---|---|---|"]
    for arg, status, note in trainer_argument_rows(lightning_trainer_arguments()):
        out.append(f"| `{arg}` | {status} | {note} |")
    out += ["", "## Relay's own `Trainer` arguments\n", "| argument | default | what it does |\n|---|---|---|"]
    for arg, default, text in relay_only_argument_rows():
        out.append(f"| `{arg}` | `{default}` | {text} |")
    return "\n".join(out) + "\n"


def main() -> None:
    if "--walk" in sys.argv:
        from trainer.lightning_compat.surface import walk

        with open(surface.DATA, "w", encoding="utf-8") as f:
            f.write(walk.dumps(walk.walk()))
        surface.load.cache_clear()
    sys.stdout.write(page(run_check()))


if __name__ == "__main__":
    main()
