"""``trainer.strategy`` as code written for Lightning reads it during a fit (MLflow's autolog reads
``lightning_module``): its public members, what the module/optimizer/precision members hold, ``reduce``, the state
helpers, the step calls, and the hooks a strategy subclass overrides, in order with the module's hooks."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tests.compat.lightning_diff.common import loader, quiet


def _single_device(fw: SimpleNamespace) -> type:
    if fw.name == "lightning":
        from lightning.pytorch.strategies import SingleDeviceStrategy
    else:
        from plugins.strategies.single_device import SingleDeviceStrategy
    return SingleDeviceStrategy


def checks(fw: SimpleNamespace) -> dict:
    class Net(fw.Module):
        def __init__(self, calls: list) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.calls = calls

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def validation_step(self, batch, batch_idx):
            return None

        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1)]

        def on_train_start(self):
            self.calls.append("module.on_train_start")

        def on_train_batch_start(self, batch, batch_idx):
            self.calls.append(f"module.on_train_batch_start.{batch_idx}")

        def on_train_end(self):
            self.calls.append("module.on_train_end")

    def members() -> dict:
        seen: dict = {}

        class Look(fw.Callback):
            def on_train_start(self, trainer, pl_module):
                s = trainer.strategy
                batch = next(iter(trainer.train_dataloader))
                seen.update(
                    names=sorted(n for n in dir(s) if not n.startswith("_")),
                    lightning_module=s.lightning_module is pl_module, model=s.model is trainer.model,
                    precision_plugin=s.precision_plugin is trainer.precision_plugin,
                    optimizers=[o is p for o, p in zip(s.optimizers, trainer.optimizers)] + [len(s.optimizers)],
                    schedulers=len(s.lr_scheduler_configs),
                    reduce=[float(s.reduce(torch.tensor(3.0))), float(s.reduce(torch.tensor(3.0), reduce_op="sum")),
                            s.reduce("text")],
                    state_keys=sorted(s.lightning_module_state_dict()),
                    optimizer_state=sorted(s.optimizer_state(trainer.optimizers[0])),
                    step=float(s.training_step(batch, 0)) == float(pl_module.training_step(batch, 0)),
                    process_dataloader=s.process_dataloader(trainer.train_dataloader) is trainer.train_dataloader,
                    flags=[s.lightning_restore_optimizer, s.handles_gradient_accumulation, s.launcher,
                           s.restore_checkpoint_after_setup])
                with s.model_sharded_context():
                    seen["sharded_context"] = True

        trainer = fw.Trainer(**quiet(max_steps=2, callbacks=[Look()], limit_val_batches=0))
        trainer.fit(Net([]), loader())
        return seen

    def hooks() -> list:
        calls: list = []

        class Recording(_single_device(fw)):
            def on_train_start(self):
                calls.append("strategy.on_train_start")

            def on_train_batch_start(self, batch, batch_idx):
                calls.append(f"strategy.on_train_batch_start.{batch_idx}")

            def on_train_end(self):
                calls.append("strategy.on_train_end")

            def on_validation_start(self):
                calls.append("strategy.on_validation_start")

            def on_exception(self, exception):
                calls.append(f"strategy.on_exception.{type(exception).__name__}")

        class Fails(Net):
            def training_step(self, batch, batch_idx):
                if batch_idx == 1:
                    raise ValueError("stop")
                return super().training_step(batch, batch_idx)

        options = quiet(max_steps=2, limit_val_batches=1, num_sanity_val_steps=0, val_check_interval=2)
        options.pop("accelerator"), options.pop("devices")
        fw.Trainer(**options, strategy=Recording(device=torch.device("cpu"))).fit(
            Net(calls), loader(), loader())
        try:
            fw.Trainer(**options, strategy=Recording(device=torch.device("cpu"))).fit(Fails(calls), loader())
        except ValueError:
            calls.append("raised")
        return calls

    return {"strategy_members": members, "strategy_hooks": hooks}
