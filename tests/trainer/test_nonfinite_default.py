"""Who handles a non-finite loss: Relay's own API stops (the safer default), unless a SpikeDetection callback is
there to handle it or Lightning's defaults hold (the zero-edit mode); an explicit ``stop_on_nonfinite_loss`` wins."""

from __future__ import annotations

import pytest

from tests.distributed.fault_script import Net
from tests.helpers import loader, quiet
from trainer import Trainer
from trainer.callbacks import SpikeDetection


def test_the_default_stops_unless_spike_detection_or_the_zero_edit_mode_handles_it(monkeypatch):
    assert Trainer(**quiet()).stop_on_nonfinite_loss is True
    assert Trainer(**quiet(callbacks=[SpikeDetection()])).stop_on_nonfinite_loss is False
    assert Trainer(**quiet(callbacks=[SpikeDetection()], stop_on_nonfinite_loss=True)).stop_on_nonfinite_loss is True
    monkeypatch.setenv("RELAY_LIGHTNING_COMPAT", "1")  # what `python -m trainer.lightning_compat` sets
    assert Trainer(**quiet()).stop_on_nonfinite_loss is False
    assert Trainer(**quiet(stop_on_nonfinite_loss=True)).stop_on_nonfinite_loss is True


def test_spike_detection_gets_the_nonfinite_loss_and_raises_its_own_exception(tmp_path):
    from trainer.fabric.utilities.spike import TrainingSpikeException

    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=8, callbacks=[SpikeDetection(rtol=1e9)]))
    with pytest.raises(TrainingSpikeException, match="batch 3"):
        trainer.fit(Net(nan_at_step=3), loader())
    assert (tmp_path / "skip_batches.json").read_text().split() == ["[", "2,", "3", "]"]
