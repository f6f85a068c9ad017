"""Behaviour that real Lightning code notices, observed the same way on both frameworks.

``python real_code_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py); tests/compat/test_real_code_differences.py compares the two.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tests.compat.lightning_diff.frameworks import load  # noqa: E402
from tests.compat.lightning_diff.harness import emit  # noqa: E402

fw = load(sys.argv[1])
QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)


def data(n: int = 16, batch_size: int = 4) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size)


class Model(fw.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(3, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("loss", loss, prog_bar=True, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y), prog_bar=True)

    def predict_step(self, batch, batch_idx):
        return self.layer(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Data(fw.DataModule):
    def train_dataloader(self):
        return data()

    def val_dataloader(self):
        return data(8)


def wrap(obj, name, calls, style):
    """Patch a hook on the instance the usual ways: functools.wraps, or partial + update_wrapper."""
    original = getattr(obj, name)
    label = f"{type(obj).__name__}.{name}"

    def record(*args, **kwargs):
        calls[label] = calls.get(label, 0) + 1
        return original(*args, **kwargs)

    if style == "wraps":
        setattr(obj, name, functools.wraps(original)(record))
    else:
        wrapper = functools.partial(record)
        functools.update_wrapper(wrapper, original)
        setattr(obj, name, wrapper)


def check_wrapped_hooks():
    calls: dict[str, int] = {}
    callback, model, datamodule = fw.Callback(), Model(), Data()
    wrap(callback, "on_train_epoch_start", calls, "wraps")
    wrap(callback, "on_train_batch_end", calls, "partial")
    wrap(callback, "on_validation_end", calls, "wraps")
    wrap(model, "on_train_epoch_end", calls, "wraps")
    wrap(model, "on_validation_epoch_start", calls, "partial")
    wrap(model, "on_before_optimizer_step", calls, "wraps")
    wrap(model, "optimizer_step", calls, "wraps")  # the loop's fast path for the default optimizer_step
    wrap(model, "optimizer_zero_grad", calls, "partial")
    wrap(datamodule, "on_before_batch_transfer", calls, "wraps")
    wrap(datamodule, "transfer_batch_to_device", calls, "partial")
    trainer = fw.Trainer(max_epochs=2, callbacks=[callback], num_sanity_val_steps=0, **QUIET)
    trainer.fit(model, datamodule=datamodule)
    return calls


def types_and_values(metrics):
    return {k: [type(v).__name__, round(float(v), 5)] for k, v in sorted(metrics.items())}


def check_metric_types():
    trainer = fw.Trainer(max_epochs=1, limit_train_batches=3, **QUIET)
    trainer.fit(Model(), datamodule=Data())
    return {"logged": types_and_values(trainer.logged_metrics),
            "callback": types_and_values(trainer.callback_metrics),
            "progress_bar": types_and_values(trainer.progress_bar_metrics)}


def check_epoch_end_value():
    class EpochEnd(Model):
        def training_step(self, batch, batch_idx):
            self.log("a", float(batch_idx), prog_bar=True)
            return super().training_step(batch, batch_idx)

        def on_train_epoch_end(self):
            self.log("a", 123.0, prog_bar=True)

    trainer = fw.Trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=0, **QUIET)
    trainer.fit(EpochEnd(), datamodule=Data())
    return {"progress_bar": types_and_values(trainer.progress_bar_metrics),
            "callback": types_and_values(trainer.callback_metrics),
            "logged": types_and_values(trainer.logged_metrics)}


def check_torchmetrics():
    import torchmetrics

    records = []

    class Recording(fw.Logger):
        name, version = "rec", 0

        def log_metrics(self, metrics, step=None):
            records.append([step, {k: round(float(v), 5) for k, v in sorted(metrics.items())}])

        def log_hyperparams(self, *args, **kwargs):
            pass

    counts = []

    class Counts(fw.Callback):
        def on_train_epoch_start(self, trainer, module):
            counts.append(["train_start", module.mean._update_count, module.total._update_count])

        def on_train_epoch_end(self, trainer, module):
            counts.append(["train_end", module.mean._update_count, module.total._update_count])

        def on_validation_epoch_end(self, trainer, module):
            counts.append(["val_end", module.val_mean._update_count])

    class WithMetrics(Model):
        def __init__(self):
            super().__init__()
            self.mean = torchmetrics.MeanMetric()
            self.total = torchmetrics.SumMetric()
            self.val_mean = torchmetrics.MeanMetric()

        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.mean(loss.detach())  # forward: a step value and an epoch accumulation
            self.log("m", self.mean, on_step=True, on_epoch=True, prog_bar=True)
            self.total.update(batch[0].shape[0])
            self.log("n", self.total, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.val_mean.update(torch.nn.functional.mse_loss(self.layer(x), y))
            self.log("val_m", self.val_mean)

    trainer = fw.Trainer(max_epochs=2, logger=Recording(), log_every_n_steps=1, callbacks=[Counts()],
                         num_sanity_val_steps=0, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(WithMetrics(), datamodule=Data())
    return {"records": records, "counts": counts, "callback": types_and_values(trainer.callback_metrics)}


def check_setup_stage():
    seen = []

    def record(owner, hook):
        def method(self, *args, **kwargs):
            seen.append([owner, hook, [repr(a) for a in args], {k: repr(v) for k, v in kwargs.items()}])
        return method

    Mod = type("StageModel", (Model,), {"setup": record("module", "setup"), "teardown": record("module", "teardown")})
    Dm = type("StageData", (Data,), {"setup": record("datamodule", "setup"),
                                    "teardown": record("datamodule", "teardown")})
    Cb = type("StageCallback", (fw.Callback,), {
        "setup": lambda self, trainer, pl_module, *a, **k: seen.append(
            ["callback", "setup", [repr(x) for x in a], {n: repr(v) for n, v in k.items()}]),
        "teardown": lambda self, trainer, pl_module, *a, **k: seen.append(
            ["callback", "teardown", [repr(x) for x in a], {n: repr(v) for n, v in k.items()}])})
    trainer = fw.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, callbacks=[Cb()], **QUIET)
    trainer.fit(Mod(), datamodule=Dm())
    trainer.validate(Mod(), datamodule=Dm(), verbose=False)
    return seen


def check_predict_without_return():
    trainer = fw.Trainer(**QUIET)
    out = trainer.predict(Model(), data(8), return_predictions=False)
    stored = repr(trainer.predict_loop.predictions)
    kept = trainer.predict(Model(), data(8))
    return {"returned": repr(out), "stored": stored, "kept_batches": len(kept),
            "kept_stored": len(trainer.predict_loop.predictions)}


def check_fast_dev_run_checkpoint(tmp: Path):
    checkpoint = fw.ModelCheckpoint(dirpath=str(tmp / "ckpts"), monitor="val_loss")
    trainer = fw.Trainer(fast_dev_run=True, callbacks=[checkpoint], enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Model(), datamodule=Data())
    cb = trainer.checkpoint_callback
    files = sorted(os.listdir(tmp / "ckpts")) if (tmp / "ckpts").exists() else []
    default = fw.Trainer(fast_dev_run=2, enable_progress_bar=False, enable_model_summary=False)
    default.fit(Model(), datamodule=Data())
    return {"type": type(cb).__name__ if cb is not None else None, "same": cb is checkpoint,
            "best_model_path": getattr(cb, "best_model_path", None), "files": files,
            "default_type": type(default.checkpoint_callback).__name__,
            "default_best": getattr(default.checkpoint_callback, "best_model_path", None),
            "default_files": sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*.ckpt"))}


def check_wikitext2():
    """Data prepared for Lightning's transformer demo (data/wikitext-2.txt) is read the same way."""
    if fw.name == "lightning":
        from lightning.pytorch.demos import WikiText2
    else:
        from trainer.demos import WikiText2
    Path("data").mkdir(exist_ok=True)
    Path("data/wikitext-2.txt").write_text(" = Valkyria Chronicles = \n\n the game began development in 2010 .\n"
                                            " it met with positive sales in Japan , and the game 's story .\n")
    dataset = WikiText2(block_size=5)
    inputs, target = dataset[1]
    return {"vocab": dataset.vocab_size, "len": len(dataset), "inputs": inputs.tolist(), "target": target.tolist()}


result = {}
for name, check in [("wrapped_hooks", check_wrapped_hooks), ("metric_types", check_metric_types),
                    ("epoch_end_value", check_epoch_end_value), ("torchmetrics", check_torchmetrics),
                    ("setup_stage", check_setup_stage), ("wikitext2", check_wikitext2), ("predict_without_return", check_predict_without_return),
                    ("fast_dev_run_checkpoint", lambda: check_fast_dev_run_checkpoint(Path.cwd()))]:
    fw.seed_everything(0)
    try:
        result[name] = check()
    except Exception as exc:  # noqa: BLE001 (an observation too)
        result[name] = {"exception": f"{type(exc).__name__}: {exc}"}
emit(result)
