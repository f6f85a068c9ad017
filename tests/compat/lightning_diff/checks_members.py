"""Trainer members Lightning code reads: placement (``device_ids``, ``num_devices``, ``node_rank``,
``distributed_sampler_kwargs``), run state (``evaluating``, ``interrupted``, ``received_sigterm``,
``enable_validation``, ``num_sanity_val_batches``), the loaders in use (``train_dataloader``,
``val_dataloaders``, ``test_dataloaders``, ``predict_dataloaders``), ``early_stopping_callbacks``,
``init_module``, ``print`` and ``scaler``; observed before, during and after real runs."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import tempfile
from types import SimpleNamespace

import torch
from torch.utils.data import DataLoader

from tests.compat.lightning_diff.common import data, quiet


def describe(loaders) -> object:
    """What a user can see of a member's loaders (their identity is ``through_runs``' "given" entries)."""
    if loaders is None:
        return None
    if isinstance(loaders, (list, tuple)):
        return {type(loaders).__name__: [describe(dl) for dl in loaders]}
    return {"type": type(loaders).__name__, "len": len(loaders), "batch_size": loaders.batch_size,
            "samples": len(loaders.dataset)}


def checks(fw: SimpleNamespace) -> dict:
    def snapshot(trainer) -> dict:
        return {"evaluating": trainer.evaluating, "interrupted": trainer.interrupted,
                "received_sigterm": trainer.received_sigterm, "enable_validation": trainer.enable_validation,
                "num_sanity_val_batches": list(trainer.num_sanity_val_batches),
                "train": describe(trainer.train_dataloader), "val": describe(trainer.val_dataloaders),
                "test": describe(trainer.test_dataloaders), "predict": describe(trainer.predict_dataloaders)}

    class Watched(fw.Module):
        """Notes the members at the first batch of every step kind."""

        def __init__(self, notes: dict) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.notes = notes

        def _note(self, where: str, batch_idx: int) -> None:
            if batch_idx == 0 and where not in self.notes:
                self.notes[where] = snapshot(self.trainer)

        def training_step(self, batch, batch_idx):
            self._note("training_step", batch_idx)
            return self.layer(batch[0]).sum()

        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            self._note("sanity_step" if self.trainer.sanity_checking else "validation_step", batch_idx)

        def test_step(self, batch, batch_idx, dataloader_idx=0):
            self._note("test_step", batch_idx)

        def predict_step(self, batch, batch_idx, dataloader_idx=0):
            self._note("predict_step", batch_idx)
            return self.layer(batch[0])

        def on_train_end(self):
            self.notes["on_train_end"] = snapshot(self.trainer)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def through_runs() -> dict:
        notes: dict = {}
        model = Watched(notes)
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=3, num_sanity_val_steps=2, **quiet())
        notes["before_fit"] = snapshot(trainer)
        val = [DataLoader(data(6), batch_size=2), DataLoader(data(2), batch_size=2)]
        train = DataLoader(data(8), batch_size=2, shuffle=True)
        trainer.fit(model, train, val)
        notes["after_fit"] = snapshot(trainer)
        # on one process the members are the loaders given (prediction's are rebuilt to track indices)
        given = {"train": trainer.train_dataloader is train,
                 "val": [a is b for a, b in zip(trainer.val_dataloaders, val)]}
        validate = DataLoader(data(4), batch_size=2)
        trainer.validate(model, validate, verbose=False)
        notes["after_validate"] = snapshot(trainer)
        given["validate"] = trainer.val_dataloaders is validate
        test = [DataLoader(data(4), batch_size=4)]
        trainer.test(model, test, verbose=False)
        notes["after_test"] = snapshot(trainer)
        given["test"] = trainer.test_dataloaders[0] is test[0]
        predict = DataLoader(data(3), batch_size=2)
        trainer.predict(model, predict)
        notes["after_predict"] = snapshot(trainer)
        given["predict"] = trainer.predict_dataloaders is predict
        notes["given"] = given
        return notes

    def without_validation(**kwargs) -> dict:
        notes: dict = {}
        model = _without_validation_step(fw, notes) if kwargs.pop("no_step", False) else Watched(notes)
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, **quiet(**kwargs))
        trainer.fit(model, DataLoader(data(4), batch_size=2), DataLoader(data(4), batch_size=2))
        notes["after_fit"] = snapshot(trainer)
        return notes

    def nothing_to_run() -> dict:
        """``limit_*_batches=0``: Lightning does not load those loaders, so the members stay None."""
        notes: dict = {}
        model = Watched(notes)
        trainer = fw.Trainer(**quiet(max_epochs=1, limit_train_batches=0, limit_val_batches=0, limit_test_batches=0,
                                     limit_predict_batches=0))
        trainer.fit(model, DataLoader(data(4), batch_size=2), DataLoader(data(4), batch_size=2))
        notes.pop("on_train_end", None)  # whether that hook runs with no batches is the hook-order checks' matter
        notes["after_fit"] = snapshot(trainer)
        for run in ("validate", "test", "predict"):
            kwargs = {} if run == "predict" else {"verbose": False}
            getattr(trainer, run)(model, DataLoader(data(4), batch_size=2), **kwargs)
            notes[f"after_{run}"] = snapshot(trainer)
        return notes

    def interrupted() -> dict:
        class Fails(Watched):
            def training_step(self, batch, batch_idx):
                if batch_idx == 1:
                    raise ValueError("stop here")
                return super().training_step(batch, batch_idx)

        trainer = fw.Trainer(max_epochs=1, **quiet())
        out = {"before": trainer.interrupted}
        try:
            trainer.fit(Fails({}), DataLoader(data(8), batch_size=2))
        except ValueError as err:
            out["raised"] = str(err)
        out["after"] = trainer.interrupted
        trainer.validate(Watched({}), DataLoader(data(2), batch_size=2), verbose=False)
        out["after_a_finished_validate"] = trainer.interrupted
        return out

    def sigterm() -> dict:
        out: dict = {}

        class Terminated(Watched):
            def training_step(self, batch, batch_idx):
                if batch_idx == 1:
                    out["before_signal"] = self.trainer.received_sigterm
                    os.kill(os.getpid(), signal.SIGTERM)
                    out["in_the_step_after_signal"] = self.trainer.received_sigterm
                return super().training_step(batch, batch_idx)

        # its own directory: Relay leaves a preemption checkpoint there, which a later fit in the same directory
        # would resume from
        with tempfile.TemporaryDirectory() as root:
            trainer = fw.Trainer(max_epochs=1, **quiet(default_root_dir=root))
            out["before_fit"] = trainer.received_sigterm
            try:
                trainer.fit(Terminated({}), DataLoader(data(8), batch_size=2))
                out["fit_returned"] = True
            except SystemExit as err:
                out["fit_raised_system_exit"] = isinstance(err, SystemExit)
            out["after_fit"] = {"received_sigterm": trainer.received_sigterm, "interrupted": trainer.interrupted}
            trainer.validate(Watched({}), DataLoader(data(2), batch_size=2), verbose=False)
            out["after_next_call"] = trainer.received_sigterm
        return out

    def placement() -> dict:
        out = {}
        for name, kwargs in {"single": {}, "ddp_1": {"strategy": "ddp"}, "ddp_2": {"strategy": "ddp", "devices": 2}}.items():
            trainer = fw.Trainer(**quiet(**kwargs))
            out[name] = {"device_ids": trainer.device_ids, "num_devices": trainer.num_devices,
                         "node_rank": trainer.node_rank, "distributed_sampler_kwargs": trainer.distributed_sampler_kwargs}
        return out

    def accelerator_connector() -> dict:
        """What projects read of Lightning's accelerator connector, built on its own (scvi-tools asks it which
        device an ``accelerator``/``devices`` pair means) and the Trainer's."""
        if fw.name == "lightning":
            from lightning.pytorch.trainer.connectors.accelerator_connector import _AcceleratorConnector
        else:
            from trainer.lightning_compat.impl.loops_connectors import _AcceleratorConnector

        def seen(connector) -> dict:
            return {"accelerator": connector._accelerator_flag, "devices": connector._devices_flag,
                    "parallel": [str(d) for d in connector._parallel_devices], "nodes": connector._num_nodes_flag,
                    "precision": connector._precision_flag, "distributed": connector.is_distributed,
                    "strategy": type(connector.strategy).__name__, "sampler": connector.use_distributed_sampler}

        out = {}
        for name, kwargs in {"auto": {}, "cpu_2": {"devices": "2"},
                             "bf16": {"precision": "bf16-mixed", "use_distributed_sampler": False}}.items():
            out[name] = seen(_AcceleratorConnector(**kwargs))
            out[f"trainer_{name}"] = seen(fw.Trainer(**quiet(**kwargs))._accelerator_connector)
        return out

    def early_stopping() -> dict:
        callbacks = [fw.EarlyStopping("a"), fw.ModelCheckpoint(), fw.EarlyStopping("b", patience=7)]
        trainer = fw.Trainer(**quiet(callbacks=callbacks, enable_checkpointing=True))
        none = fw.Trainer(**quiet())
        return {"monitors": [c.monitor for c in trainer.early_stopping_callbacks],
                "first": trainer.early_stopping_callback.monitor, "none": none.early_stopping_callbacks}

    def init_module() -> dict:
        out = {}
        for precision in ("32-true", "64-true", "bf16-true", "16-true", "bf16-mixed"):
            trainer = fw.Trainer(**quiet(precision=precision))
            with trainer.init_module():
                layer = torch.nn.Linear(2, 2)
                made = torch.ones(1)
            out[precision] = {"weight": str(layer.weight.dtype), "device": layer.weight.device.type,
                              "tensor": str(made.dtype), "default_after": str(torch.get_default_dtype())}
        trainer = fw.Trainer(**quiet())
        for empty in (None, False, True):
            with trainer.init_module(empty_init=empty):
                t = torch.zeros(3)
                torch.nn.init.constant_(t, 5.0)
            out[f"empty_init={empty}"] = t.tolist()
        return out

    def print_() -> dict:
        trainer = fw.Trainer(**quiet())
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            trainer.print("a", 1, sep="-", end="!\n")
            trainer.print()
        return {"printed": buf.getvalue()}

    def scaler() -> dict:
        return {p: repr(fw.Trainer(**quiet(precision=p)).scaler) for p in ("32-true", "bf16-mixed", "16-mixed")}

    return {
        "members_through_runs": through_runs,
        "members_no_validation_step": lambda: without_validation(no_step=True),
        "members_limit_val_0": lambda: without_validation(limit_val_batches=0),
        "members_no_sanity_check": lambda: without_validation(num_sanity_val_steps=0),
        "members_all_sanity_batches": lambda: without_validation(num_sanity_val_steps=-1),
        "members_limit_0_everywhere": nothing_to_run,
        "members_interrupted": interrupted,
        "members_sigterm": sigterm,
        "members_placement": placement,
        "members_accelerator_connector": accelerator_connector,
        "members_early_stopping": early_stopping,
        "members_init_module": init_module,
        "members_print": print_,
        "members_scaler": scaler,
    }


def _without_validation_step(fw: SimpleNamespace, notes: dict):
    """A module with training only (validation loaders are passed, but there is no ``validation_step``)."""

    class TrainOnly(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            if batch_idx == 0:
                t = self.trainer
                notes["training_step"] = {"enable_validation": t.enable_validation, "val": describe(t.val_dataloaders),
                                          "num_sanity_val_batches": list(t.num_sanity_val_batches)}
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return TrainOnly()
