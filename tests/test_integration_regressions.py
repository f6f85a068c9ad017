"""Behaviours that two features meet in: each test failed on the first merge of the parallel work."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.fault_script import Net
from tests.helpers import loader, quiet
from trainer import Trainer
from trainer.callbacks import Callback


def test_one_process_preemption_checkpoints_after_the_current_step_not_at_the_epoch_end(tmp_path: Path):
    """The per-batch fast path of a single process must still see a preemption signal."""

    class SignalAtBatch2(Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if batch_idx == 2:
                os.kill(os.getpid(), signal.SIGUSR1)

    from trainer.preemption import Preempted

    data = loader(n=400)  # one long epoch: the signal must not wait for its end
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_epochs=1, callbacks=[SignalAtBatch2()],
                              preemption_signals=["SIGUSR1"]))
    with pytest.raises(Preempted) as raised:
        trainer.fit(Net(), data)
    assert raised.value.code == 128 + signal.SIGUSR1
    last = next(tmp_path.rglob("last.ckpt"))
    assert torch.load(last, weights_only=True)["global_step"] == 3  # batches 0, 1, 2 trained, then saved


def test_configure_gradient_clipping_runs_every_step_without_gradient_clip_val(tmp_path: Path):
    calls: list[int] = []

    class OwnClipping(Net):
        def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
            calls.append(self.trainer.global_step)

    Trainer(**quiet(default_root_dir=tmp_path, max_steps=4, enable_checkpointing=False)).fit(OwnClipping(), loader())
    assert calls == [0, 1, 2, 3]


def test_nonfinite_loss_is_caught_when_the_strategy_runs_backward_itself(tmp_path: Path):
    """Pipeline and DeepSpeed report through ``BackwardStep.finished``: the loss check must run there too."""
    from plugins.strategies.single_device import SingleDeviceStrategy
    from trainer.nonfinite import NonFiniteLossError

    class OwnBackward(SingleDeviceStrategy):
        def forward_backward(self, step_fn: Any, batch: Any, batch_idx: int, backward: Any) -> Any:
            backward.zero_grad()
            output = step_fn(batch, batch_idx)
            (output / backward.accumulate).backward()
            return backward.finished(output)

    model = Net(nan_at_step=2)
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=5, enable_checkpointing=False,
                              strategy=OwnBackward(torch.device("cpu"))))
    with pytest.raises(NonFiniteLossError, match="at global step 2"):
        trainer.fit(model, loader())
    assert all(torch.isfinite(p).all() for p in model.parameters())
