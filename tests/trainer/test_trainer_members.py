"""Lightning's Trainer members in trainer/trainer_properties.py, read during and after real single-process runs
(placement of a multi-process run is checked at construction, from the variables torchrun sets)."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from torch.utils.data import DataLoader

from tests.helpers import Regression, loader, quiet, regression_data
from trainer import DataModule, Module, Trainer
from trainer.callbacks import EarlyStopping, ModelCheckpoint
from trainer.callbacks.base import Callback

TORCHRUN_NODE_1_OF_2 = {"TORCHELASTIC_RUN_ID": "members", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4",
                        "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}


def cpu(**kwargs) -> dict:
    return quiet(accelerator="cpu", devices=1, **kwargs)


class Notes(Callback):
    """The members as hooks see them, by hook name (first call only)."""

    def __init__(self) -> None:
        self.seen: dict[str, dict] = {}

    def _note(self, trainer: Trainer, where: str) -> None:
        self.seen.setdefault(where, {
            "evaluating": trainer.evaluating, "enable_validation": trainer.enable_validation,
            "num_sanity_val_batches": list(trainer.num_sanity_val_batches), "train": trainer.train_dataloader,
            "val": trainer.val_dataloaders, "test": trainer.test_dataloaders, "predict": trainer.predict_dataloaders,
        })

    def on_sanity_check_start(self, trainer, pl_module):
        self._note(trainer, "sanity_start")

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._note(trainer, "sanity_batch" if trainer.sanity_checking else "val_batch")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._note(trainer, "train_batch")

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._note(trainer, "test_batch")

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._note(trainer, "predict_batch")


class TwoValLoaders(Regression):
    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.log("val_loss", self._loss(batch))


# --- placement ---------------------------------------------------------------------------------------------
def test_single_process_placement():
    trainer = Trainer(**cpu())
    assert trainer.device_ids == [0] and trainer.num_devices == 1 and trainer.node_rank == 0
    assert trainer.distributed_sampler_kwargs is None  # one process: nothing to shard


def test_ddp_placement_before_the_processes_start():
    trainer = Trainer(**quiet(accelerator="cpu", strategy="ddp", devices=2))
    assert trainer.device_ids == [0, 1] and trainer.num_devices == 2 and trainer.node_rank == 0
    assert trainer.distributed_sampler_kwargs == {"num_replicas": 2, "rank": 0}
    one = Trainer(**quiet(accelerator="cpu", strategy="ddp", devices=1))  # a parallel strategy on one device
    assert one.distributed_sampler_kwargs == {"num_replicas": 1, "rank": 0}


def test_placement_of_a_torchrun_worker_on_the_second_node(monkeypatch):
    for name, value in TORCHRUN_NODE_1_OF_2.items():
        monkeypatch.setenv(name, value)
    trainer = Trainer(**quiet(accelerator="cpu", strategy="ddp", devices=2, num_nodes=2))
    assert trainer.node_rank == 1 and trainer.local_rank == 1 and trainer.global_rank == 3
    assert trainer.device_ids == [0, 1] and trainer.num_devices == 2
    assert trainer.distributed_sampler_kwargs == {"num_replicas": 4, "rank": 3}


# --- print ---------------------------------------------------------------------------------------------------
def test_print_goes_to_stdout_with_print_arguments(capsys):
    Trainer(**cpu()).print("a", 1, sep="-", end="!\n")
    assert capsys.readouterr().out == "a-1!\n"


def test_print_is_silent_on_other_local_ranks(monkeypatch, capsys):
    """Lightning prints once per node: local rank 0 (this worker is local rank 1 of node 1)."""
    for name, value in TORCHRUN_NODE_1_OF_2.items():
        monkeypatch.setenv(name, value)
    Trainer(**quiet(accelerator="cpu", strategy="ddp", devices=2, num_nodes=2)).print("not me")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("RANK", "2")
    Trainer(**quiet(accelerator="cpu", strategy="ddp", devices=2, num_nodes=2)).print("node 1's first")
    assert capsys.readouterr().out == "node 1's first\n"


# --- init_module and scaler ----------------------------------------------------------------------------------
@pytest.mark.parametrize("precision, dtype", [("32-true", torch.float32), ("bf16-true", torch.bfloat16),
                                              ("64-true", torch.float64), ("bf16-mixed", torch.float32)])
def test_init_module_makes_parameters_in_the_precisions_dtype(precision, dtype):
    trainer = Trainer(**cpu(precision=precision))
    with trainer.init_module():
        layer = torch.nn.Linear(2, 2)
    assert layer.weight.dtype == layer.bias.dtype == dtype and layer.weight.device.type == "cpu"
    assert torch.get_default_dtype() == torch.float32  # given back on leaving


def test_a_model_made_under_init_module_trains_in_bf16():
    trainer = Trainer(**cpu(precision="bf16-true", max_steps=3))
    with trainer.init_module():
        model = Regression()
    before = model.layer.weight.detach().clone()
    assert before.dtype == torch.bfloat16
    trainer.fit(model, loader())
    assert trainer.global_step == 3 and model.layer.weight.dtype == torch.bfloat16
    assert not torch.equal(model.layer.weight.detach(), before)


def test_init_module_empty_init_skips_initialisers_only_when_asked():
    trainer = Trainer(**cpu())
    for empty, expected in ((None, 5.0), (False, 5.0), (True, 0.0)):
        with trainer.init_module(empty_init=empty):
            t = torch.nn.init.constant_(torch.zeros(3), 5.0)
        assert t.tolist() == [expected] * 3, empty
    with trainer.init_module(empty_init=True):
        layer = torch.nn.Linear(2, 2)  # allocated, left uninitialised: usable once weights are loaded
    layer.load_state_dict(torch.nn.Linear(2, 2).state_dict())


def test_init_module_with_fsdp_builds_on_the_meta_device_for_empty_init():
    """Selection level (no processes start): FSDP materialises a meta model shard by shard in setup_module."""
    trainer = Trainer(**quiet(accelerator="cpu", strategy="fsdp", devices=2, precision="bf16-true"))
    with trainer.init_module(empty_init=True):
        meta = torch.nn.Linear(2, 2)
    with trainer.init_module():
        full = torch.nn.Linear(2, 2)
    assert meta.weight.is_meta and meta.weight.dtype == torch.bfloat16
    assert full.weight.device.type == "cpu" and full.weight.dtype == torch.bfloat16


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled, but CUDA is not available")
def test_scaler_is_the_precision_plugins_grad_scaler():
    from plugins.precision.half import MixedPrecision

    assert Trainer(**cpu()).scaler is None
    assert Trainer(**cpu(precision="bf16-mixed")).scaler is None  # bf16 needs no loss scaling
    fp16 = MixedPrecision("16-mixed", device_type="cuda")  # the GPU case; built here without one
    trainer = Trainer(**cpu(precision=fp16))
    assert isinstance(trainer.scaler, torch.amp.GradScaler) and trainer.scaler is fp16.scaler


# --- run state -----------------------------------------------------------------------------------------------
def test_evaluating_and_loaders_through_fit_validate_test_predict():
    notes = Notes()
    trainer = Trainer(**cpu(max_epochs=1, limit_train_batches=3, num_sanity_val_steps=2, callbacks=[notes]))
    assert trainer.train_dataloader is trainer.val_dataloaders is None and not trainer.evaluating
    assert trainer.num_sanity_val_batches == [] and not trainer.enable_validation
    train, val = loader(32, 8), [loader(24, 8), loader(8, 8)]
    trainer.fit(TwoValLoaders(), train, val)
    seen = notes.seen
    # the validation loaders are asked for at the sanity check, the training loader after it (as Lightning)
    assert seen["sanity_start"]["val"] is None and seen["sanity_start"]["num_sanity_val_batches"] == []
    sanity = seen["sanity_batch"]
    assert sanity["evaluating"] and sanity["train"] is None and sanity["num_sanity_val_batches"] == [2, 1]
    assert [dl.dataset for dl in sanity["val"]] == [dl.dataset for dl in val] and isinstance(sanity["val"], list)
    batch = seen["train_batch"]
    assert not batch["evaluating"] and batch["enable_validation"]
    assert batch["train"].dataset is train.dataset and len(batch["train"]) == 4 and batch["train"].batch_size == 8
    assert seen["val_batch"]["evaluating"] and seen["val_batch"]["val"] is sanity["val"]
    assert trainer.train_dataloader is batch["train"] and trainer.num_sanity_val_batches == [2, 1]

    trainer.validate(dataloaders=loader(16, 8), verbose=False)
    assert trainer.train_dataloader is None and len(trainer.val_dataloaders) == 2  # one loader, not a list
    trainer.test(dataloaders=[loader(8, 4)], verbose=False)
    assert seen["test_batch"]["evaluating"] and trainer.val_dataloaders is None
    assert isinstance(trainer.test_dataloaders, list) and len(trainer.test_dataloaders[0]) == 2
    trainer.predict(dataloaders=loader(8, 4))
    assert not seen["predict_batch"]["evaluating"] and trainer.test_dataloaders is None
    assert trainer.predict_dataloaders is seen["predict_batch"]["predict"] and len(trainer.predict_dataloaders) == 2


def test_loaders_from_a_datamodule_and_iterables_kept_as_given():
    class Data(DataModule):
        def train_dataloader(self):
            return [(torch.randn(4, 4), torch.randn(4, 1)) for _ in range(3)]  # a list of batches, not a DataLoader

        def val_dataloader(self):
            return DataLoader(regression_data(16), batch_size=8)

    dm = Data()
    trainer = Trainer(**cpu(max_epochs=1))
    trainer.fit(Regression(), datamodule=dm)
    assert isinstance(trainer.train_dataloader, list) and len(trainer.train_dataloader) == 3
    assert len(trainer.val_dataloaders) == 2 and trainer.enable_validation


def test_num_sanity_val_batches_follows_num_sanity_val_steps():
    for steps, expected in ((-1, [3, 1]), (0, [0, 0]), (5, [3, 1])):
        trainer = Trainer(**cpu(max_steps=1, num_sanity_val_steps=steps))
        trainer.fit(TwoValLoaders(), loader(16, 8), [loader(24, 8), loader(8, 8)])
        assert trainer.num_sanity_val_batches == expected, steps


def test_enable_validation_needs_loaders_a_validation_step_and_batches():
    def enabled(model, val=None, **kwargs) -> bool:
        trainer = Trainer(**cpu(max_steps=1, **kwargs))
        trainer.fit(model, loader(16, 8), val)
        return trainer.enable_validation

    class TrainOnly(Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    assert enabled(Regression(), loader(16, 8))
    assert not enabled(TrainOnly(), loader(16, 8))  # no validation_step
    assert not enabled(Regression())  # no validation loaders
    assert not enabled(Regression(), loader(16, 8), limit_val_batches=0)
    assert enabled(Regression(), loader(16, 8), limit_val_batches=0.5)


def test_interrupted_after_a_failed_fit_until_the_next_call_finishes():
    class Fails(Regression):
        def training_step(self, batch, batch_idx):
            if batch_idx == 1:
                raise ValueError("stop here")
            return super().training_step(batch, batch_idx)

    trainer = Trainer(**cpu(max_epochs=1))
    assert not trainer.interrupted
    with pytest.raises(ValueError, match="stop here"):
        trainer.fit(Fails(), loader())
    assert trainer.interrupted and trainer.state.status == "interrupted"
    trainer.validate(Regression(), loader(), verbose=False)
    assert not trainer.interrupted and trainer.state.finished


@pytest.mark.parametrize("sig, expected", [(signal.SIGTERM, True), (signal.SIGUSR1, False)])
def test_received_sigterm_after_a_signal_during_fit(tmp_path, sig, expected):
    from trainer.checkpointing.preemption import Preempted
    from trainer.utilities.exceptions import SIGTERMException

    seen: dict[str, bool] = {}

    class Signalled(Regression):
        def training_step(self, batch, batch_idx):
            if batch_idx == 1:
                seen["before"] = self.trainer.received_sigterm
                os.kill(os.getpid(), sig)
                seen["after"] = self.trainer.received_sigterm
            return super().training_step(batch, batch_idx)

    programs: list[int] = []
    previous = signal.signal(sig, lambda signum, frame: programs.append(signum))  # the program's own handler
    trainer = Trainer(**cpu(max_epochs=1, default_root_dir=tmp_path))
    try:
        with pytest.raises(SIGTERMException) as raised:  # checkpoint after the step, then exit with 128 + the signal
            trainer.fit(Signalled(), loader())
    finally:
        signal.signal(sig, previous)
    assert isinstance(raised.value, Preempted) and raised.value.code == 128 + sig
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()
    assert programs == [sig]  # the handler set before the fit still ran (Lightning's rule)
    assert seen == {"before": False, "after": expected}
    assert trainer.received_sigterm is expected and trainer.interrupted
    trainer.validate(Regression(), loader(), verbose=False)
    assert not trainer.received_sigterm  # each Trainer call starts without one, as in Lightning


def test_early_stopping_callbacks_lists_every_early_stopping_callback():
    first, second = EarlyStopping("a"), EarlyStopping("b")
    trainer = Trainer(**quiet(accelerator="cpu", devices=1, enable_checkpointing=True,
                              callbacks=[first, ModelCheckpoint(), second]))
    assert trainer.early_stopping_callbacks == [first, second] and trainer.early_stopping_callback is first
    assert Trainer(**cpu()).early_stopping_callbacks == [] and Trainer(**cpu()).early_stopping_callback is None


def test_val_check_batch_is_the_fit_loops_interval():
    trainer = Trainer(**cpu(max_steps=2, val_check_interval=3))
    assert trainer.val_check_batch is None  # before fit, as in Lightning
    trainer.fit(Regression(), loader(64, 8), loader(16, 8))
    assert trainer.val_check_batch == 3
    trainer = Trainer(**cpu(max_steps=2, val_check_interval=0.5))
    trainer.fit(Regression(), loader(64, 8), loader(16, 8))
    assert trainer.val_check_batch == 4  # half of 8 batches
