"""Bad input gets a clear error before work starts, and loses nothing."""

from __future__ import annotations

import os
import pickle

import pytest
import torch

from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.errors import MisconfigurationError


def test_unknown_trainer_argument_suggests_closest():
    with pytest.raises(TypeError, match=r"unknown argument 'max_epoch'.*Did you mean 'max_epochs'"):
        Trainer(max_epoch=3)


def test_configure_optimizers_unusable(tmp_path):
    class Bad(Regression):
        def configure_optimizers(self):
            return "adam"

    with pytest.raises(MisconfigurationError, match="configure_optimizers returned str"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Bad(), loader())


def test_missing_dataloader(tmp_path):
    with pytest.raises(MisconfigurationError, match=r"passed to `Trainer.fit\(train_dataloaders=...\)`. Found None.*"
                                                    r"implement `def train_dataloader") as caught:
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Regression())
    assert isinstance(caught.value, TypeError)  # Lightning's type
    with pytest.raises(MisconfigurationError, match="implement `def test_dataloader"):
        Trainer(**quiet(default_root_dir=tmp_path)).test(Regression())
    with pytest.raises(TypeError, match=r"passed to `Trainer.validate\(dataloaders=...\)`. Found 3"):
        Trainer(**quiet(default_root_dir=tmp_path)).validate(Regression(), dataloaders=[loader(), 3])


def test_ckpt_path_missing_or_not_a_checkpoint(tmp_path):
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=1))
    with pytest.raises(MisconfigurationError, match="Checkpoint file not found: .*nope.ckpt") as err:
        trainer.fit(Regression(), loader(), ckpt_path=tmp_path / "nope.ckpt")
    assert isinstance(err.value, FileNotFoundError)  # Lightning's type, for `except FileNotFoundError`
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(MisconfigurationError, match="not a checkpoint torch can read"):
        trainer.fit(Regression(), loader(), ckpt_path=junk)
    other = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(2)}, other)
    with pytest.raises(MisconfigurationError, match="not a Relay checkpoint"):
        trainer.fit(Regression(), loader(), ckpt_path=other)


def test_ckpt_last_without_checkpoints(tmp_path):
    """Lightning's rule: not an error (it can be set before a first fit); the call goes on without a checkpoint."""
    with pytest.warns(UserWarning, match="no last checkpoint available.*current weights are used"):
        Trainer(**quiet(default_root_dir=tmp_path)).test(Regression(), loader(), ckpt_path="last")
    with pytest.warns(UserWarning, match="training starts from scratch"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Regression(), loader(), ckpt_path="last")


class _RunsCode:
    """Unpickling this would create a marker file (a stand-in for arbitrary code)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_that_runs_code_on_unpickling_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.ckpt"
    with open(evil, "wb") as f:
        pickle.dump({"state_dict": {}, "loops": {}, "payload": _RunsCode(str(marker))}, f)
    # plain pickle would run it: prove the file is really armed
    with open(evil, "rb") as f:
        pickle.load(f)
    assert marker.exists()
    marker.unlink()
    torch.save({"state_dict": {}, "loops": {}, "payload": _RunsCode(str(marker))}, evil)
    with pytest.raises(MisconfigurationError, match="refused"):
        Trainer(**quiet(default_root_dir=tmp_path)).test(Regression(), loader(), ckpt_path=evil)
    assert not marker.exists()


class _Scale:
    def __init__(self, value: float) -> None:
        self.value = value


class _KeepsObjects(Regression):
    def on_save_checkpoint(self, checkpoint):
        checkpoint["scale"] = _Scale(2.5)

    def on_load_checkpoint(self, checkpoint):
        self.scale = checkpoint["scale"].value


def test_a_checkpoint_with_the_users_objects_loads_only_with_weights_only_false(tmp_path):
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=2))
    trainer.fit(_KeepsObjects(), loader())
    trainer.save_checkpoint(tmp_path / "o.ckpt")
    with pytest.raises(MisconfigurationError, match=r"refused: .*load it with weights_only=False"):
        _KeepsObjects.load_from_checkpoint(tmp_path / "o.ckpt")
    assert _KeepsObjects.load_from_checkpoint(tmp_path / "o.ckpt", weights_only=False).scale == 2.5
    resumed = _KeepsObjects()
    Trainer(**quiet(default_root_dir=tmp_path, max_steps=3)).fit(resumed, loader(), ckpt_path=tmp_path / "o.ckpt",
                                                                 weights_only=False)
    assert resumed.scale == 2.5 and resumed.global_step == 3
    with pytest.raises(MisconfigurationError, match="refused"):  # the trust was for that call only
        Trainer(**quiet(default_root_dir=tmp_path)).test(_KeepsObjects(), loader(), ckpt_path=tmp_path / "o.ckpt")


def test_weights_only_checkpoint_cannot_resume_training(tmp_path):
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=2))
    model = Regression()
    trainer.fit(model, loader())
    trainer.save_checkpoint(tmp_path / "w.ckpt", weights_only=True)
    with pytest.raises(MisconfigurationError, match="weights only"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=4)).fit(Regression(), loader(), ckpt_path=tmp_path / "w.ckpt")
    # but it loads for evaluation
    assert Trainer(**quiet(default_root_dir=tmp_path)).test(Regression(), loader(), ckpt_path=tmp_path / "w.ckpt")


def test_atomic_save_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    from trainer.checkpointing.files import atomic_save

    path = tmp_path / "a.ckpt"
    atomic_save({"x": torch.ones(2)}, path)

    def broken_save(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        atomic_save({"x": torch.zeros(2)}, path)
    monkeypatch.undo()
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["a.ckpt"]  # no temporary file left behind


def test_not_a_module(tmp_path):
    with pytest.raises(MisconfigurationError, match="expects a trainer.Module"):
        Trainer(**quiet(default_root_dir=tmp_path)).fit(torch.nn.Linear(2, 2), loader())


def test_bad_plugin_arguments():
    with pytest.raises(ValueError, match="Did you mean 'cpu'"):
        Trainer(accelerator="cpux")
    with pytest.raises(ValueError, match="precision"):
        Trainer(precision="8-mixed")
