"""Lightning's callbacks, run the same way on either framework: ``python callbacks_program.py lightning|relay``.

Written from Lightning's documentation of each callback; every scenario returns what a user observes (final
weights, frozen parameters and optimizer groups per epoch, files written, stop points, sparsity, exceptions).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.lightning_diff.common import exception
from tests.compat.lightning_diff.harness import emit

NAMES = ("Callback", "StochasticWeightAveraging", "EMAWeightAveraging", "WeightAveraging", "BackboneFinetuning",
         "BasePredictionWriter", "Timer", "OnExceptionCheckpoint", "ModelPruning", "SpikeDetection")


def load(framework: str) -> SimpleNamespace:
    if framework == "lightning":
        import lightning.pytorch as pl
        from lightning.pytorch import callbacks

        return SimpleNamespace(Trainer=pl.Trainer, Module=pl.LightningModule, seed=pl.seed_everything,
                               extra={}, **{n: getattr(callbacks, n) for n in NAMES})
    import trainer
    from trainer import callbacks

    # Relay stops on a non-finite loss by default; SpikeDetection's own check is what is compared here
    return SimpleNamespace(Trainer=trainer.Trainer, Module=trainer.Module, seed=trainer.seed_everything,
                           extra={"stop_on_nonfinite_loss": False}, **{n: getattr(callbacks, n) for n in NAMES})


def loader(n: int = 16, batch_size: int = 4, shuffle: bool = False) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g))
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle)


def quiet(fw, **kwargs) -> dict:
    base = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, num_sanity_val_steps=0)
    base.update(fw.extra)
    base.update(kwargs)
    return base


def rounded(module: nn.Module) -> dict:
    """Every parameter and buffer, to 6 decimals (averaged weights must agree to 1e-6)."""
    return {k: [round(float(x), 6) for x in v.detach().flatten()] for k, v in module.state_dict().items()}


def model_class(fw, batch_norm: bool = False, scheduler: str | None = None, lr: float = 0.1):
    class Net(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            layers = [nn.Linear(4, 8)] + ([nn.BatchNorm1d(8)] if batch_norm else []) + [nn.ReLU()]
            self.backbone = nn.Sequential(*layers)
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.backbone(x))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self(x), y))

        def predict_step(self, batch, batch_idx, dataloader_idx=0):
            return self(batch[0])

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=lr, momentum=0.9)
            if scheduler == "step_lr":
                return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)}
            return opt

    return Net


def lr_recorder(fw, record: list):
    class Recorder(fw.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            record.append([round(g["lr"], 8) for g in trainer.optimizers[0].param_groups])

    return Recorder()


def swa(fw, batch_norm: bool, scheduler: str | None, **kwargs) -> dict:
    fw.seed(0)
    model = model_class(fw, batch_norm=batch_norm, scheduler=scheduler)()
    lrs: list = []
    cb = fw.StochasticWeightAveraging(swa_lrs=0.05, **kwargs)
    t = fw.Trainer(max_epochs=4, callbacks=[cb, lr_recorder(fw, lrs)], **quiet(fw))
    t.fit(model, loader())
    return {"weights": rounded(model), "lrs": lrs, "global_step": t.global_step, "current_epoch": t.current_epoch,
            "max_epochs": t.max_epochs, "n_averaged": int(cb.n_averaged), "schedulers": len(t.lr_scheduler_configs),
            "state_keys": sorted(cb.state_dict())}


def ema(fw) -> dict:
    fw.seed(0)
    model = model_class(fw)()
    seen: list = []

    class Watch(fw.Callback):
        def on_validation_epoch_end(self, trainer, pl_module):
            seen.append(round(float(trainer.callback_metrics["val_loss"]), 6))

    cb = fw.EMAWeightAveraging(decay=0.9, update_starting_at_step=2)
    t = fw.Trainer(max_epochs=3, callbacks=[cb, Watch()], default_root_dir="ema", **quiet(fw))
    t.fit(model, loader(), loader(8))
    t.save_checkpoint("ema.ckpt")
    ckpt = torch.load("ema.ckpt", weights_only=True)
    return {"weights": rounded(model), "val_losses": seen, "ckpt_keys": sorted(k for k in ckpt if k in (
        "state_dict", "current_model_state", "averaging_state")), "averaging_state": {
            k: v.tolist() for k, v in ckpt.get("averaging_state", {}).items()},
            "state": cb.state_dict(), "update_step0": cb.should_update(step_idx=0),
            "update_epoch": cb.should_update(epoch_idx=5)}


def weight_averaging(fw) -> dict:
    fw.seed(0)
    model = model_class(fw)()

    class EveryEpoch(fw.WeightAveraging):
        def should_update(self, step_idx=None, epoch_idx=None):
            return epoch_idx is not None

    t = fw.Trainer(max_epochs=3, callbacks=[EveryEpoch(use_buffers=False)], **quiet(fw))
    t.fit(model, loader())
    return {"weights": rounded(model)}


def finetuning(fw) -> dict:
    fw.seed(0)
    model = model_class(fw, batch_norm=True)()
    per_epoch: list = []

    class Watch(fw.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            per_epoch.append({
                "frozen": sorted(n for n, p in pl_module.named_parameters() if not p.requires_grad),
                "groups": [{"lr": round(g["lr"], 8), "n": len(g["params"])}
                           for g in trainer.optimizers[0].param_groups],
            })

    cb = fw.BackboneFinetuning(unfreeze_backbone_at_epoch=2, lambda_func=lambda epoch: 1.5,
                               backbone_initial_ratio_lr=0.1)
    t = fw.Trainer(max_epochs=5, callbacks=[cb, Watch()], **quiet(fw))
    t.fit(model, loader())
    return {"per_epoch": per_epoch, "weights": rounded(model),
            "previous_backbone_lr": round(cb.previous_backbone_lr, 8),
            "bn_tracking": model.backbone[1].track_running_stats,
            "state": json.loads(json.dumps({k: cb.state_dict()[k] for k in (
                "internal_optimizer_metadata", "previous_backbone_lr")}, default=str))}


def finetuning_no_backbone(fw) -> dict:
    class NoBackbone(model_class(fw)):
        def __init__(self) -> None:
            super().__init__()
            del self.backbone
            self.body = nn.Linear(4, 8)

        def forward(self, x):
            return self.head(self.body(x))

    class Frozen(fw.BackboneFinetuning):
        def freeze_before_training(self, pl_module):
            pass

    try:
        fw.Trainer(max_epochs=1, callbacks=[Frozen()], **quiet(fw)).fit(NoBackbone(), loader())
    except Exception as err:
        return exception(err)
    return {"exception": None}


def writer(fw) -> dict:
    fw.seed(0)
    model = model_class(fw)()
    calls: list = []

    class Writer(fw.BasePredictionWriter):
        def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx):
            torch.save(prediction, os.path.join("preds", f"batch_{dataloader_idx}_{batch_idx}.pt"))
            calls.append(["batch", batch_idx, dataloader_idx, list(batch_indices), list(prediction.shape)])

        def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices):
            torch.save(predictions, os.path.join("preds", "epoch.pt"))
            calls.append(["epoch", len(predictions), [len(p) if isinstance(p, list) else list(p.shape)
                                                      for p in predictions], batch_indices])

    os.makedirs("preds", exist_ok=True)
    t = fw.Trainer(callbacks=[Writer(write_interval="batch_and_epoch")], **quiet(fw))
    out = t.predict(model, [loader(10, 4), loader(6, 3)], return_predictions=False)
    single: list = []

    class EpochOnly(fw.BasePredictionWriter):
        def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices):
            single.append([len(predictions), batch_indices])

    fw.Trainer(callbacks=[EpochOnly("epoch")], **quiet(fw)).predict(model, loader(10, 4))
    try:
        fw.BasePredictionWriter("sometimes")
        bad = None
    except Exception as err:
        bad = exception(err)
    return {"calls": calls, "files": sorted(os.listdir("preds")), "returned": out, "single": single, "bad": bad}


def timer(fw) -> dict:
    class Slow(model_class(fw)):
        def training_step(self, batch, batch_idx):
            time.sleep(0.03)
            return super().training_step(batch, batch_idx)

    out = {}
    for interval in ("step", "epoch"):
        fw.seed(0)
        cb = fw.Timer(duration={"seconds": 0.3}, interval=interval, verbose=False)
        t = fw.Trainer(max_epochs=50, callbacks=[cb], **quiet(fw))
        t.fit(Slow(), loader(16, 4), loader(4, 4))
        out[interval] = {"stopped_early": t.global_step < 200, "elapsed_over": cb.time_elapsed() >= 0.3,
                         "remaining_le_0": cb.time_remaining() <= 0,
                         "val_timed": cb.time_elapsed("validate") > 0, "test_elapsed": cb.time_elapsed("test"),
                         "start_set": cb.start_time() is not None, "end_set": cb.end_time() is not None,
                         "state_keys": sorted(cb.state_dict()["time_elapsed"])}
        if interval == "epoch":  # stops only at an epoch's end
            out[interval]["epoch_boundary"] = t.global_step % 4 == 0
    fw.seed(0)
    spent = fw.Timer(duration={"seconds": 0})  # no time left: Lightning stops before the first epoch
    t = fw.Trainer(max_epochs=3, callbacks=[spent], **quiet(fw))
    t.fit(Slow(), loader(16, 4))
    out["zero"] = {"global_step": t.global_step, "current_epoch": t.current_epoch, "should_stop": t.should_stop}
    unlimited = fw.Timer()
    out["none"] = [unlimited.time_remaining(), unlimited.time_elapsed(), unlimited.start_time()]
    for bad in ("1:00", "00:01:00:00:00"):
        try:
            fw.Timer(duration=bad)
            out[bad] = None
        except Exception as err:
            out[bad] = exception(err)
    try:
        fw.Timer(interval="batch")
    except Exception as err:
        out["bad_interval"] = exception(err)
    return out


def on_exception(fw) -> dict:
    class Failing(model_class(fw)):
        def training_step(self, batch, batch_idx):
            if self.global_step == 3:
                raise RuntimeError("boom")
            return super().training_step(batch, batch_idx)

    fw.seed(0)
    out = {}
    try:
        fw.Trainer(max_epochs=2, callbacks=[fw.OnExceptionCheckpoint("exc")],
                   **quiet(fw, enable_checkpointing=True)).fit(Failing(), loader())
    except RuntimeError as err:
        out["raised"] = str(err)
    out["files"] = sorted(os.listdir("exc")) if os.path.isdir("exc") else []
    if out["files"]:
        ckpt = torch.load(os.path.join("exc", out["files"][0]), weights_only=True)
        out["global_step"] = ckpt["global_step"]
        out["epoch"] = ckpt["epoch"]
    cb = fw.OnExceptionCheckpoint("ok", filename="mine")
    out["ckpt_path"] = os.path.relpath(cb.ckpt_path)
    t = fw.Trainer(max_epochs=1, callbacks=[cb], **quiet(fw, enable_checkpointing=True))
    t.fit(model_class(fw)(), loader())
    out["after_success"] = sorted(os.listdir("ok")) if os.path.isdir("ok") else []
    out["last_callback"] = type(t.callbacks[-1]).__name__
    try:
        fw.Trainer(callbacks=[fw.OnExceptionCheckpoint("x")], **quiet(fw))
    except Exception as err:
        out["checkpointing_disabled"] = exception(err)
    try:
        fw.OnExceptionCheckpoint("x", filename="")
    except Exception as err:
        out["empty_name"] = exception(err)
    return out


def pruning(fw, **kwargs) -> dict:
    fw.seed(0)
    model = model_class(fw)()
    sparsity: list = []

    class Watch(fw.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            sparsity.append({n: round(float((m.weight == 0).float().mean()), 4)
                             for n, m in pl_module.named_modules() if isinstance(m, nn.Linear)})

    cb = fw.ModelPruning(**kwargs)
    t = fw.Trainer(max_epochs=3, callbacks=[cb, Watch()], **quiet(fw))
    t.fit(model, loader())
    t.save_checkpoint("pruned.ckpt")
    keys = sorted(torch.load("pruned.ckpt", weights_only=True)["state_dict"])
    return {"sparsity": sparsity, "weights": rounded(model), "ckpt_keys": keys,
            "final_keys": sorted(model.state_dict())}


def pruning_errors(fw) -> dict:
    out = {}
    for name, kwargs in {"unknown_fn": {"pruning_fn": "l3"}, "no_dim": {"pruning_fn": "ln_structured",
                                                                         "use_global_unstructured": False},
                         "bad_names": {"pruning_fn": "l1_unstructured", "parameter_names": ["gamma"]},
                         "structured_global": {"pruning_fn": "random_structured", "pruning_dim": 0},
                         "bad_verbose": {"pruning_fn": "l1_unstructured", "verbose": 3}}.items():
        try:
            fw.ModelPruning(**kwargs)
            out[name] = None
        except Exception as err:
            out[name] = exception(err)
    return out


def spike(fw, losses: list, **kwargs) -> dict:
    class Scripted(model_class(fw)):
        def training_step(self, batch, batch_idx):
            x, _ = batch
            return self(x).sum() * 0 + losses[self.global_step % len(losses)]

    fw.seed(0)
    cb = fw.SpikeDetection(exclude_batches_path="spikes", **kwargs)
    out: dict = {}
    try:
        fw.Trainer(max_epochs=1, callbacks=[cb], **quiet(fw)).fit(Scripted(), loader(40, 4))
        out["raised"] = None
    except Exception as err:
        out["raised"] = {"type": type(err).__name__, "message": str(err), "runtime": isinstance(err, RuntimeError)}
    path = Path("spikes", "skip_batches.json")
    out["file"] = json.loads(path.read_text()) if path.exists() else None
    if path.exists():
        path.unlink()
    out["bad_batches"] = cb.bad_batches
    state = cb.state_dict()
    out["state"] = {k: state[k] for k in ("last_val", "mode", "warmup", "atol", "rtol", "bad_batches")}
    out["state"]["last_val"] = round(float(out["state"]["last_val"]), 6)
    return out


SCENARIOS = {
    "swa": lambda fw: swa(fw, False, None, swa_epoch_start=2),
    "swa_scheduler": lambda fw: swa(fw, False, "step_lr", swa_epoch_start=0.5, annealing_epochs=2,
                                    annealing_strategy="linear"),
    "swa_batch_norm": lambda fw: swa(fw, True, None, swa_epoch_start=3),
    "ema": ema,
    "weight_averaging": weight_averaging,
    "finetuning": finetuning,
    "finetuning_no_backbone": finetuning_no_backbone,
    "writer": writer,
    "timer": timer,
    "on_exception": on_exception,
    "pruning_global": lambda fw: pruning(fw, pruning_fn="l1_unstructured", amount=0.25),
    "pruning_local": lambda fw: pruning(fw, pruning_fn="ln_structured", use_global_unstructured=False, pruning_dim=0,
                                        parameter_names=["weight"],
                                        pruning_norm=1, amount=lambda epoch: 0.2 * (epoch + 1),
                                        use_lottery_ticket_hypothesis=False, make_pruning_permanent=False),
    "pruning_errors": pruning_errors,
    "spike_raises": lambda fw: spike(fw, [1.0, 0.9, 0.95, 0.9, 0.85, 9.0, 0.8]),
    "spike_nan": lambda fw: spike(fw, [1.0, 0.9, float("nan"), 0.9]),
    "spike_atol": lambda fw: spike(fw, [1.0, 0.9, 0.95, 0.9, 0.85, 9.0, 0.8], atol=100.0),
    "spike_max_mode": lambda fw: spike(fw, [1.0, 1.1, 1.2, 0.1, 1.3], mode="max", rtol=0.5, warmup=2),
}


def main(framework: str, names: list[str]) -> None:
    warnings.filterwarnings("ignore")
    fw = load(framework)
    result = {}
    for name in names or list(SCENARIOS):
        try:
            result[name] = SCENARIOS[name](fw)
        except Exception as err:  # an exception is an observation too
            result[name] = {"unexpected": exception(err)}
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
