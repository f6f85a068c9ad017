"""Trainer arguments that change which batches the loops see: ``overfit_batches`` and
``reload_dataloaders_every_n_epochs`` (Lightning 2.x documents both)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.compat.lightning_diff.common import loader, quiet


def _numbered(n: int, offset: float = 0.0) -> TensorDataset:
    """Sample i has features all equal to offset + i, so a batch names its samples."""
    x = (torch.arange(n, dtype=torch.float32) + offset).unsqueeze(1).repeat(1, 4)
    return TensorDataset(x, torch.zeros(n, 1))


def checks(fw: SimpleNamespace) -> dict:
    class Seen(fw.Module):
        def __init__(self, shuffle: bool = True) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.events: list = []
            self.shuffle = shuffle

        def _ids(self, batch) -> list[int]:
            return [int(v) for v in batch[0][:, 0].tolist()]

        def training_step(self, batch, batch_idx):
            self.events.append(["train", self.current_epoch, self._ids(batch)])
            return self.layer(batch[0]).sum()

        def validation_step(self, batch, batch_idx):
            self.events.append(["val", self.current_epoch, self._ids(batch)])

        def on_train_epoch_start(self):
            self.events.append(["on_train_epoch_start", self.current_epoch])

        def train_dataloader(self):
            self.events.append(["train_dataloader", self.current_epoch])
            return DataLoader(_numbered(8, 100 * self.current_epoch), batch_size=2, shuffle=self.shuffle)

        def val_dataloader(self):
            self.events.append(["val_dataloader", self.current_epoch])
            return DataLoader(_numbered(6, 1000 + 100 * self.current_epoch), batch_size=2)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    def run(**kwargs) -> list:
        fw.seed_everything(0)
        model = Seen(shuffle=kwargs.pop("shuffle", True))
        trainer = fw.Trainer(**quiet(**{"num_sanity_val_steps": 0, **kwargs}))
        trainer.fit(model)
        return model.events + [["num_training_batches", trainer.num_training_batches],
                               ["num_val_batches", list(trainer.num_val_batches)]]

    class Events(fw.DataModule):
        """Batch-transfer hooks on the DataModule: they run instead of the Module's, in Lightning's order."""

        def __init__(self, events: list) -> None:
            super().__init__()
            self.events = events

        def train_dataloader(self):
            return DataLoader(_numbered(4), batch_size=2)

        def on_before_batch_transfer(self, batch, dataloader_idx):
            self.events.append(["dm_before", dataloader_idx])
            return [batch[0] + 1000, batch[1]]

        def transfer_batch_to_device(self, batch, device, dataloader_idx):
            self.events.append(["dm_transfer", str(device)])
            return [t.to(device) for t in batch]

        def on_after_batch_transfer(self, batch, dataloader_idx):
            self.events.append(["dm_after"])
            return batch

    class Both(Seen):
        def on_before_batch_transfer(self, batch, dataloader_idx):
            self.events.append(["module_before"])
            return batch

        def on_after_batch_transfer(self, batch, dataloader_idx):
            self.events.append(["module_after"])
            return batch

    def datamodule_hooks(module_too: bool) -> list:
        model = Both() if module_too else Seen()
        trainer = fw.Trainer(**quiet(max_epochs=1, limit_val_batches=0, num_sanity_val_steps=0))
        trainer.fit(model, datamodule=Events(model.events))
        return model.events

    def sources(trainer, model, datamodule) -> list:
        """Each loop's ``_data_source``: what it points at, its hook's name, ``is_module()``, ``is_defined()``."""
        loops = [trainer.fit_loop, trainer.fit_loop.epoch_loop.val_loop, trainer.validate_loop, trainer.test_loop,
                 trainer.predict_loop]
        kind = {id(model): "model", id(datamodule): "datamodule", id(None): None}
        return [[kind.get(id(s.instance), "loaders"), s.name, s.is_module(), s.is_defined()]
                for s in (loop._data_source for loop in loops)]

    class Asks(fw.Module):
        """Reads the sources where code decides what its scheduler monitors (``configure_optimizers``)."""

        def __init__(self, datamodule=None) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.datamodule, self.seen = datamodule, []

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).sum()

        def validation_step(self, batch, batch_idx):
            pass

        def configure_optimizers(self):
            self.seen.append(sources(self.trainer, self, self.datamodule))
            return torch.optim.SGD(self.parameters(), lr=0.0)

    class AsksWithVal(Asks):
        def val_dataloader(self):
            return loader(4)

    class Data(fw.DataModule):
        def train_dataloader(self):
            return loader(4)

    def data_sources() -> list:
        settings = quiet(max_steps=1, limit_val_batches=1, num_sanity_val_steps=0)
        model = Asks()
        trainer = fw.Trainer(**settings)
        before = sources(trainer, model, None)
        trainer.fit(model, loader(4))
        trainer.fit(model, loader(4), loader(4))
        trainer.validate(model, loader(4))
        with_val = AsksWithVal()
        fw.Trainer(**settings).fit(with_val, loader(4))
        dm = Data()
        in_dm = Asks(dm)
        fw.Trainer(**settings).fit(in_dm, datamodule=dm)
        return [before, model.seen, sources(trainer, model, None), with_val.seen, in_dm.seen]

    class GradMode(Asks):
        def on_train_start(self):
            self.seen.append(["on_train_start", torch.is_grad_enabled()])

        def training_step(self, batch, batch_idx):
            self.seen.append(["training_step", torch.is_grad_enabled()])
            return super().training_step(batch, batch_idx)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    def grad_mode(**kwargs) -> list:
        """Gradients switched off before a fit (a generator suspended inside ``torch.no_grad()``): what the fit's
        hooks and steps see, and what is left after it (and after a fit that trains no batch)."""
        model, seen = GradMode(), []
        for settings in ({}, {"limit_train_batches": 0}):
            torch.set_grad_enabled(False)
            try:
                fw.Trainer(**quiet(max_steps=1, limit_val_batches=0, **settings)).fit(model, loader(4))
                seen.append(torch.is_grad_enabled())
            finally:
                torch.set_grad_enabled(True)
        return model.seen + seen

    return {
        "data_sources": data_sources,
        "grad_mode": grad_mode,
        "datamodule_transfer_hooks": lambda: datamodule_hooks(False),
        "datamodule_transfer_hooks_win": lambda: datamodule_hooks(True),
        "overfit_int": lambda: run(max_epochs=2, overfit_batches=2, shuffle=False),
        "overfit_turns_shuffle_off": lambda: run(max_epochs=1, overfit_batches=3),
        "overfit_fraction": lambda: run(max_epochs=1, overfit_batches=0.5, shuffle=False),
        "reload_every_2": lambda: run(max_epochs=4, limit_train_batches=1, limit_val_batches=1,
                                      reload_dataloaders_every_n_epochs=2, shuffle=False),
        "reload_every_1": lambda: run(max_epochs=2, limit_train_batches=1, limit_val_batches=1,
                                      reload_dataloaders_every_n_epochs=1, shuffle=False),
        "no_reload": lambda: run(max_epochs=2, limit_train_batches=1, limit_val_batches=1, shuffle=False),
        # validation every 3rd epoch, loaders every 2nd: when each loader is asked for (not before it is needed)
        "reload_infrequent_val": lambda: run(max_epochs=6, limit_train_batches=1, limit_val_batches=1,
                                             check_val_every_n_epoch=3, reload_dataloaders_every_n_epochs=2,
                                             shuffle=False),
        "reload_infrequent_val_sanity": lambda: run(max_epochs=6, limit_train_batches=1, limit_val_batches=1,
                                                    check_val_every_n_epoch=3, reload_dataloaders_every_n_epochs=4,
                                                    num_sanity_val_steps=1, shuffle=False),
    }
