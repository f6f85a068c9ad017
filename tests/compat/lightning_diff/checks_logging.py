"""What ``self.log`` shows a user: logger records per step, ``logged_metrics``, ``callback_metrics`` and
``progress_bar_metrics`` (keys, ``_step``/``_epoch`` suffixes, values), ``reduce_fx`` callables, and a fit that
stops at ``max_steps`` in the middle of an epoch."""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from tests.compat.lightning_diff.common import loader, quiet
from tests.compat.lightning_diff.frameworks import recording_logger


def _values(metrics: dict) -> dict:
    return {k: round(float(v), 5) for k, v in sorted(metrics.items())}


def checks(fw: SimpleNamespace) -> dict:
    Recording = recording_logger(fw)

    class Logs(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            value = torch.tensor(float(batch_idx + 10 * self.current_epoch))
            self.log("both", value, on_step=True, on_epoch=True)
            self.log("step_only", value, prog_bar=True)
            self.log("r_min", value, on_step=False, on_epoch=True, reduce_fx=min)
            self.log("r_max", value, on_step=False, on_epoch=True, reduce_fx=max)
            self.log("r_torch_max", value, on_step=False, on_epoch=True, reduce_fx=torch.max)
            self.log("r_torch_mean", value, on_step=False, on_epoch=True, reduce_fx=torch.mean)
            self.log("r_sum", value, on_step=False, on_epoch=True, reduce_fx="sum")
            self.log("r_torch_sum", value, on_step=False, on_epoch=True, reduce_fx=torch.sum)
            self.log("hidden", value, logger=False, on_step=True, on_epoch=True)
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def validation_step(self, batch, batch_idx):
            value = torch.tensor(float(100 + batch_idx + 10 * self.current_epoch))
            self.log("val_default", value)
            self.log("val_both", value, on_step=True, on_epoch=True, prog_bar=True)
            self.log("val_step_only", value, on_step=True, on_epoch=False)

        def on_train_epoch_end(self):
            self.log("train_epoch_end", float(self.current_epoch))

        def on_validation_epoch_end(self):
            self.log("val_epoch_end", float(self.current_epoch))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def logging() -> dict:
        logger = Recording()
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=3, limit_val_batches=2, num_sanity_val_steps=1,
                             log_every_n_steps=1, **quiet(logger=logger))
        trainer.fit(Logs(), loader(), loader())
        out = {
            "records": [[step, metrics] for step, metrics in logger.records],
            "logged_metrics": _values(trainer.logged_metrics),
            "callback_metrics": _values(trainer.callback_metrics),
            "progress_bar_metrics": _values(trainer.progress_bar_metrics),
        }
        logger.records.clear()
        validated = trainer.validate(Logs(), loader(), verbose=False)
        out["validate_records"] = [[step, metrics] for step, metrics in logger.records]
        out["validate_returned"] = [_values(m) for m in validated]
        out["validate_logged_metrics"] = _values(trainer.logged_metrics)
        out["validate_callback_metrics"] = _values(trainer.callback_metrics)
        out["validate_progress_bar_metrics"] = _values(trainer.progress_bar_metrics)
        logger.records.clear()
        trainer.validate(Logs(), loader(), verbose=False)  # a second call numbers its steps from 0 again
        out["validate_again_records"] = [[step, metrics] for step, metrics in logger.records]
        return out

    class Stops(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.validations: list[list[int]] = []

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

        def on_validation_end(self):
            self.validations.append([self.current_epoch, self.global_step])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def stop_at_max_steps(name: str, monitor: str | None, **trainer_kwargs) -> dict:
        model = Stops()
        ckpt = fw.ModelCheckpoint(dirpath=name, monitor=monitor, save_last=True)
        trainer = fw.Trainer(max_steps=3, limit_train_batches=4, limit_val_batches=1, num_sanity_val_steps=0,
                             callbacks=[ckpt], **quiet(enable_checkpointing=True), **trainer_kwargs)
        trainer.fit(model, loader(), loader())
        return {"validations": model.validations, "files": sorted(os.listdir(name)),
                "current_epoch": trainer.current_epoch, "global_step": trainer.global_step,
                "callback_metrics": sorted(trainer.callback_metrics),
                "best": os.path.basename(ckpt.best_model_path), "last": os.path.basename(ckpt.last_model_path)}

    def max_steps_mid_epoch() -> dict:
        return {
            "no_monitor": stop_at_max_steps("a", None),
            "val_monitor": stop_at_max_steps("b", "val_loss"),
            "val_every_2_batches": stop_at_max_steps("c", "val_loss", val_check_interval=2),
            "val_every_2_epochs": stop_at_max_steps("d", None, check_val_every_n_epoch=2),
            "epoch_monitor": stop_at_max_steps("e", "epoch"),  # a value there without validation: ranked, saved
        }

    class Sparse(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            self.log("t", float(batch_idx))
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def log_every_n_steps() -> dict:
        """``logged_metrics`` holds the latest values even when ``log_every_n_steps`` has not sent them."""
        logger = Recording()
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=3, log_every_n_steps=4, **quiet(logger=logger))
        trainer.fit(Sparse(), loader())
        return {"records": [[step, metrics] for step, metrics in logger.records],
                "logged_metrics": _values(trainer.logged_metrics)}

    def hooks_that_refuse_logging() -> dict:
        """``self.log`` in each hook: logged, or refused with which error (Lightning's "You can't" table)."""
        seen: dict = {}

        def attempt(module, hook):
            try:
                module.log(hook, 1.0)
                seen[hook] = "logged"
            except Exception as err:  # noqa: BLE001 - the error is the observation
                seen[hook] = str(err)[:40]  # the words (the error's class is each framework's own)

        hooks = ["on_fit_start", "on_train_start", "on_train_end", "on_validation_end", "on_validation_model_eval",
                 "on_validation_model_train", "on_validation_model_zero_grad", "on_before_batch_transfer",
                 "on_after_batch_transfer", "on_save_checkpoint", "on_test_end", "on_predict_start"]

        def wrap(hook):
            def method(self, *args, **kwargs):
                result = getattr(super(Refusing, self), hook)(*args, **kwargs)
                attempt(self, hook)
                return result
            return method

        class Base(fw.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layer = torch.nn.Linear(4, 1)

            def training_step(self, batch, batch_idx):
                return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

            def validation_step(self, batch, batch_idx):
                pass

            test_step = validation_step

            def predict_step(self, batch, batch_idx):
                return self.layer(batch[0])

            def lr_scheduler_step(self, scheduler, metric):
                scheduler.step()
                attempt(self, "lr_scheduler_step")

            def configure_optimizers(self):
                optimizer = torch.optim.SGD(self.parameters(), lr=0.01)
                return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1)]

        Refusing = type("Refusing", (Base,), {hook: wrap(hook) for hook in hooks})
        model = Refusing()
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, limit_test_batches=1,
                             limit_predict_batches=1, num_sanity_val_steps=0, **quiet(enable_checkpointing=True))
        trainer.fit(model, loader(), loader())
        trainer.test(model, loader())
        trainer.predict(model, loader())
        return seen

    return {"logging": logging, "max_steps_mid_epoch": max_steps_mid_epoch, "log_every_n_steps": log_every_n_steps,
            "hooks_that_refuse_logging": hooks_that_refuse_logging}
