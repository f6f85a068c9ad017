"""Non-finite losses and bad input: a clear error or a Lightning-style warning, never silent wrong training."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.distributed.fault_script import Net
from tests.helpers import loader, quiet
from trainer import Trainer
from trainer.callbacks import ModelCheckpoint
from trainer.errors import MisconfigurationError


def _fit(tmp_path: Path, model, **kwargs):
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=2)
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=8, enable_checkpointing=None, callbacks=[ckpt],
                              **kwargs))
    trainer.fit(model, loader())
    return trainer


def _last(tmp_path: Path) -> dict:
    return torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)


def test_nonfinite_loss_stops_with_step_and_value_and_keeps_the_last_good_checkpoint(tmp_path):
    from trainer.loops.nonfinite import NonFiniteLossError

    model = Net(nan_at_step=3)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss \(nan\) at global step 3 \(epoch 0, batch 3"):
        _fit(tmp_path, model)
    assert all(torch.isfinite(p).all() for p in model.parameters())  # stopped before the update
    last = _last(tmp_path)
    assert last["global_step"] == 2 and all(torch.isfinite(v).all() for v in last["state_dict"].values())


def test_a_nonfinite_model_never_replaces_the_last_finite_checkpoint(tmp_path):
    model = Net(nan_at_step=3)
    with pytest.warns(UserWarning, match="Not saving .*NaN or infinite"):
        trainer = _fit(tmp_path, model, stop_on_nonfinite_loss=False)
    assert trainer.global_step == 8  # training went on, as asked
    assert not all(torch.isfinite(p).all() for p in model.parameters())
    last = _last(tmp_path)
    assert last["global_step"] == 2 and all(torch.isfinite(v).all() for v in last["state_dict"].values())
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["epoch=0-step=2.ckpt", "last.ckpt"]


def test_detect_anomaly_turns_on_autograd_anomaly_mode(tmp_path):
    seen = []

    class Watch(Net):
        def training_step(self, batch, batch_idx):
            seen.append(torch.is_anomaly_enabled())
            return super().training_step(batch, batch_idx)

    Trainer(**quiet(default_root_dir=tmp_path, max_steps=2, detect_anomaly=True)).fit(Watch(), loader())
    Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Watch(), loader())
    assert seen == [True, True, False]
    with pytest.raises(MisconfigurationError, match="detect_anomaly='yes'"):
        Trainer(detect_anomaly="yes")


def test_gradient_clip_val_must_not_be_negative():
    with pytest.raises(MisconfigurationError, match=r"gradient_clip_val=-1.*>= 0"):
        Trainer(gradient_clip_val=-1)
    with pytest.raises(MisconfigurationError, match="gradient_clip_val='big'"):
        Trainer(gradient_clip_val="big")


def test_training_step_returning_none_warns_once(tmp_path):
    class Skips(Net):
        def training_step(self, batch, batch_idx):
            return None

    with pytest.warns(UserWarning, match="`training_step` returned `None`") as record:
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=3, limit_train_batches=3, max_epochs=1)).fit(Skips(), loader())
    assert sum("returned `None`" in str(w.message) for w in record) == 1


def test_non_scalar_loss_is_a_relay_error(tmp_path):
    class Vector(Net):
        def training_step(self, batch, batch_idx):
            x, y = batch
            return (self.net(x) - y) ** 2

    with pytest.raises(MisconfigurationError, match=r"loss of shape \(8, 1\) at batch 0.*loss.mean\(\)"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Vector(), loader())


def test_tensor_as_a_dataloader_is_a_relay_error(tmp_path):
    with pytest.raises(MisconfigurationError, match=r"train_dataloaders.*Tensor.*DataLoader\(TensorDataset"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Net(), torch.randn(8, 4))


def test_model_without_parameters_is_a_relay_error(tmp_path):
    class Empty(Net):
        def __init__(self):
            super().__init__()
            del self.net

        def training_step(self, batch, batch_idx):
            return batch[0].sum()

    with pytest.raises(MisconfigurationError, match="Empty has no parameters"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Empty(), loader())


def test_empty_train_loader_warns(tmp_path):
    empty = DataLoader(TensorDataset(torch.zeros(0, 4), torch.zeros(0, 1)), batch_size=4)
    with pytest.warns(UserWarning, match="train dataloader is empty"):
        Trainer(**quiet(default_root_dir=tmp_path, max_epochs=1)).fit(Net(), empty)


def test_ckpt_path_last_never_picks_a_checkpoint_outside_this_runs_checkpoint_directory(tmp_path, capsys):
    stray = tmp_path / "downloads" / "someone-elses.ckpt"
    stray.parent.mkdir()
    first = Trainer(**quiet(default_root_dir=tmp_path / "other", max_steps=3, enable_checkpointing=None))
    first.fit(Net(), loader())
    (Path(first.checkpoint_callback.dirpath) / "epoch=0-step=3.ckpt").rename(stray)
    with pytest.warns(UserWarning, match="no last checkpoint available.*training starts from scratch"):
        trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=2, enable_checkpointing=None))
        trainer.fit(Net(), loader(), ckpt_path="last")
    assert trainer.ckpt_path is None and trainer.global_step == 2
    resumed = Trainer(**quiet(default_root_dir=tmp_path, max_steps=4, enable_checkpointing=None))
    resumed.fit(Net(), loader(), ckpt_path="last")
    out = capsys.readouterr().out
    assert f"Restoring states from the checkpoint path at {tmp_path / 'checkpoints'}" in out
    assert resumed.global_step == 4


def test_unwritable_logger_directory_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(MisconfigurationError, match=r"cannot write to .*file/logs: .*is a file, Not a directory") as info:
        Trainer(default_root_dir=blocker / "logs", max_steps=1, enable_progress_bar=False,
                enable_model_summary=False).fit(Net(), loader())
    assert "\n" not in str(info.value)


def test_more_cpu_processes_than_cores_is_allowed_with_a_warning():
    """The documented rule: on the CPU a device is a process; more than the cores runs, with a warning."""
    from plugins.selection import Hardware, LaunchInfo, parse_devices

    with pytest.warns(UserWarning, match=r"starts 3 processes on a machine with 2 CPU core\(s\)"):
        assert parse_devices(3, "cpu", Hardware(cpu_count=2), LaunchInfo()) == (0, 1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_devices(2, "cpu", Hardware(cpu_count=2), LaunchInfo()) == (0, 1)
        # under torchrun/srun the launcher decided the process count: no warning from us
        parse_devices(3, "cpu", Hardware(cpu_count=2), LaunchInfo(external=True, world_size=3, processes_per_node=3))
