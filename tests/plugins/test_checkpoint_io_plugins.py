"""Checkpoint I/O plugins: Lightning's names and signatures, atomic writes through a user's plugin, and
``AsyncCheckpointIO`` (snapshot on the caller's thread, one save in flight, ordered removals, errors raised)."""

from __future__ import annotations

import inspect
import os
import threading
import time

import pytest
import torch

from plugins.async_checkpoint_io import AsyncCheckpointIO
from plugins.checkpoint_io import CheckpointIO, TorchCheckpointIO
from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.callbacks import ModelCheckpoint
from trainer.errors import MisconfigurationError


@pytest.mark.parametrize("name", ["CheckpointIO", "TorchCheckpointIO", "AsyncCheckpointIO"])
def test_signatures_are_lightnings(name):
    import lightning.pytorch.plugins as lightning_plugins

    import trainer.lightning_compat.impl.pytorch_plugins as relay_plugins

    ours = getattr(relay_plugins, name)
    # Lightning's AsyncCheckpointIO forwards (*args, **kwargs) to the TorchCheckpointIO it wraps
    theirs = getattr(lightning_plugins, "TorchCheckpointIO" if name == "AsyncCheckpointIO" else name)
    for method in ("save_checkpoint", "load_checkpoint", "remove_checkpoint", "teardown"):
        a = list(inspect.signature(getattr(ours, method)).parameters)
        b = list(inspect.signature(getattr(theirs, method)).parameters)
        assert a == b, (name, method, a, b)
    assert issubclass(ours, relay_plugins.CheckpointIO)


class InPlace(CheckpointIO):
    """A user's plugin that writes straight to the path it gets (no temporary of its own)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.paths: list[str] = []

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        self.paths.append(str(path))
        with open(path, "wb") as f:
            f.write(b"half a checkpoint")
            if self.fail:
                raise OSError(28, "No space left on device")
        torch.save(checkpoint, path)


def test_user_plugin_writes_are_atomic(tmp_path):
    io = InPlace()
    trainer = Trainer(max_steps=2, plugins=[io], **quiet(default_root_dir=str(tmp_path)))
    trainer.fit(Regression(), loader())
    assert trainer.strategy.checkpoint_io is io
    target = tmp_path / "a.ckpt"
    trainer.save_checkpoint(target)
    assert io.paths and io.paths[-1] != str(target)  # it was handed a temporary name, renamed when finished
    before = target.read_bytes()
    io.fail = True
    with pytest.raises(OSError, match="No space left"):
        trainer.save_checkpoint(target)
    assert target.read_bytes() == before  # the failed write left the previous file
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_bad_plugins_are_clear_errors():
    with pytest.raises(MisconfigurationError, match="2 checkpoint I/O plugins"):
        Trainer(plugins=[TorchCheckpointIO(), AsyncCheckpointIO()], **quiet())
    with pytest.raises(TypeError, match="expected a CheckpointIO"):
        AsyncCheckpointIO("torch")
    with pytest.raises(TypeError, match="storage_options"):
        TorchCheckpointIO().save_checkpoint({}, "x.ckpt", storage_options={"a": 1})


class Slow(CheckpointIO):
    """Writes after a pause, recording the order of events."""

    def __init__(self, delay: float = 0.4, fail: bool = False) -> None:
        self.delay, self.fail, self.events = delay, fail, []

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        time.sleep(self.delay)
        if self.fail:
            raise OSError(5, "Input/output error")
        super().save_checkpoint(checkpoint, path)
        # the strategy hands a plugin a temporary name (.a.ckpt.relaytmp-<pid>) and renames it when done
        name = os.path.basename(path).split(".relaytmp-")[0].lstrip(".")
        self.events.append(("saved", name, threading.current_thread().name))

    def remove_checkpoint(self, path):
        self.events.append(("removed", os.path.basename(path), threading.current_thread().name))
        super().remove_checkpoint(path)


def test_async_snapshot_order_and_one_in_flight(tmp_path):
    inner = Slow()
    io = AsyncCheckpointIO(inner)
    weights = torch.zeros(1000)
    a, b = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    start = time.perf_counter()
    io.save_checkpoint({"w": weights}, a)
    returned = time.perf_counter() - start
    weights += 1  # training goes on and changes the live tensor: the file must hold the snapshot
    assert returned < inner.delay / 2 and io.in_flight
    assert io.exists(a) and not a.exists()  # counted as taken (no name clash), not yet on disk
    io.remove_checkpoint(b)  # queued behind the write
    start = time.perf_counter()
    io.save_checkpoint({"w": weights}, b)  # waits for the first write: one save in flight at most
    assert time.perf_counter() - start >= inner.delay * 0.5
    assert a.exists()
    io.remove_checkpoint(a)  # the top-k rotation: the old file goes only after its replacement is written
    io.teardown()
    assert [e[:2] for e in inner.events] == [("saved", "a.ckpt"), ("removed", "b.ckpt"), ("saved", "b.ckpt"),
                                             ("removed", "a.ckpt")]
    assert all(e[2].startswith("relay-checkpoint") for e in inner.events)
    assert torch.equal(torch.load(b, weights_only=True)["w"], torch.ones(1000))
    assert not a.exists()


def test_async_failure_raises_at_next_save_and_teardown(tmp_path):
    io = AsyncCheckpointIO(Slow(delay=0.05, fail=True))
    io.save_checkpoint({"w": torch.ones(2)}, tmp_path / "a.ckpt")
    with pytest.raises(OSError, match="Input/output error"):
        io.save_checkpoint({"w": torch.ones(2)}, tmp_path / "b.ckpt")
    io.save_checkpoint({"w": torch.ones(2)}, tmp_path / "c.ckpt")
    with pytest.raises(OSError, match="Input/output error"):
        io.teardown()


def test_fit_with_async_plugin_waits_for_the_last_write(tmp_path):
    inner = Slow(delay=0.2)
    io = AsyncCheckpointIO(inner)
    cb = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=2, save_top_k=2, save_last=True)
    trainer = Trainer(max_steps=8, plugins=[io], callbacks=[cb],
                      **quiet(enable_checkpointing=True, default_root_dir=str(tmp_path)))
    trainer.fit(Regression(), loader())
    # fit returned: every write is complete, the rotation done, nothing half-written or temporary left
    assert not io.in_flight
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch=0-step=6.ckpt", "epoch=0-step=8.ckpt", "last.ckpt"]
    from trainer.checkpointing.files import load_checkpoint

    assert load_checkpoint(tmp_path / "last.ckpt")["global_step"] == 8
    assert any(e[0] == "removed" for e in inner.events)


def test_a_save_from_on_fit_end_or_teardown_is_written_when_fit_returns(tmp_path):
    """The module's end-of-fit hooks run after the call's first wait for writes (Lightning's order): their saves are
    waited for before ``fit`` returns too."""
    from trainer.callbacks import Callback

    class SaveAtTheEnd(Callback):
        def on_fit_end(self, trainer, pl_module):
            trainer.save_checkpoint(tmp_path / "fit_end.ckpt")

        def teardown(self, trainer, pl_module, stage):
            trainer.save_checkpoint(tmp_path / "teardown.ckpt")

    io = AsyncCheckpointIO(Slow(delay=0.3))
    trainer = Trainer(max_steps=2, plugins=[io], callbacks=[SaveAtTheEnd()], **quiet(default_root_dir=str(tmp_path)))
    trainer.fit(Regression(), loader())
    assert not io.in_flight
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == ["fit_end.ckpt", "teardown.ckpt"]


def test_fit_reports_a_failed_async_write(tmp_path):
    cb = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=4)
    trainer = Trainer(max_steps=4, plugins=[AsyncCheckpointIO(Slow(delay=0.05, fail=True))], callbacks=[cb],
                      **quiet(enable_checkpointing=True))
    with pytest.raises(OSError, match="Input/output error"):
        trainer.fit(Regression(), loader())


def test_model_checkpoint_async_save_option(tmp_path):
    with pytest.raises(MisconfigurationError, match="async_save='yes'"):
        ModelCheckpoint(async_save="yes")
    cb = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=2, save_last=True, async_save=True)
    trainer = Trainer(max_steps=4, callbacks=[cb], **quiet(enable_checkpointing=True))
    trainer.fit(Regression(), loader())
    assert isinstance(trainer.strategy.checkpoint_io, AsyncCheckpointIO)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch=0-step=4.ckpt", "last.ckpt"]


class LateWorker(AsyncCheckpointIO):
    """The worker starts late: parameters are copied after the next step began, unless that step waits."""

    def _write(self, *args, **kwargs):
        time.sleep(0.3)
        return super()._write(*args, **kwargs)


def test_deferred_copy_holds_the_state_of_the_saving_step(tmp_path):
    seen: dict[int, dict[str, torch.Tensor]] = {}

    class Record(Regression):
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

        def on_train_batch_end(self, outputs, batch, batch_idx):  # before the callbacks' save of this step
            seen[self.trainer.global_step] = {k: v.clone() for k, v in self.state_dict().items()}

    io = LateWorker()
    cb = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)
    trainer = Trainer(max_steps=4, plugins=[io], callbacks=[cb], **quiet(enable_checkpointing=True))
    trainer.fit(Record(), loader())
    assert io._step_hook is None  # removed at teardown
    for step in range(1, 5):
        saved = torch.load(tmp_path / f"epoch=0-step={step}.ckpt", weights_only=True)
        for name, value in seen[step].items():
            assert torch.equal(saved["state_dict"][name], value), (step, name)
    assert not torch.equal(seen[1]["layer.weight"], seen[2]["layer.weight"])
