"""Behaviours that two features meet in: each test failed on the first merge of the parallel work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.distributed.fault_script import Net
from tests.helpers import loader, quiet
from trainer import Trainer
from trainer.callbacks import Callback


def test_one_process_preemption_checkpoints_after_the_current_step_not_at_the_epoch_end(tmp_path: Path):
    """The per-batch fast path of a single process must still see a preemption signal."""

    class SignalAtBatch2(Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if batch_idx == 2:
                os.kill(os.getpid(), signal.SIGUSR1)

    from trainer.checkpointing.preemption import Preempted

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
    from trainer.loops.nonfinite import NonFiniteLossError

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


SPAWN_PREEMPTED = """
import os, signal, sys
from tests.distributed.fault_script import Net
from tests.helpers import loader, quiet
from trainer import Trainer
from trainer.callbacks import Callback

class SignalTheLauncher(Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_rank == 0 and trainer.global_step == 3:
            os.kill(os.getppid(), signal.SIGUSR1)  # as SLURM would signal the launching process

if __name__ == "__main__":
    trainer = Trainer(**quiet(default_root_dir=sys.argv[1], max_epochs=1000, strategy="ddp_spawn", devices=2,
                              accelerator="cpu", callbacks=[SignalTheLauncher()], preemption_signals=["SIGUSR1"]))
    trainer.fit(Net(), loader())
"""


@pytest.mark.timeout(300)
@pytest.mark.fresh_python  # rank 0 signals os.getppid(): a spawn child forked warm has the warm interpreter there
def test_ddp_spawn_preemption_forwards_the_signal_checkpoints_and_exits_with_its_code(tmp_path: Path):
    import subprocess
    import sys

    script = tmp_path / "spawn_preempted.py"
    script.write_text(SPAWN_PREEMPTED)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 128 + signal.SIGUSR1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = next((tmp_path / "run").rglob("last.ckpt"))
    step = torch.load(last, weights_only=True)["global_step"]
    assert 3 <= step < 10  # saved right after the signal, not at the end of training


def test_a_failure_before_the_stage_runs_leaves_the_state_interrupted(tmp_path: Path):
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=1))
    with pytest.raises(FileNotFoundError):
        trainer.fit(Net(), loader(), ckpt_path=tmp_path / "missing.ckpt")
    assert trainer.state.status.value == "interrupted" and not trainer.state.finished


@pytest.mark.timeout(120)
@pytest.mark.parametrize("with_record", [False, True])
def test_torchruns_failure_summary_keeps_the_traceback(tmp_path, with_record):
    """Relay records a worker's uncaught error for the elastic agent; under torchrun that must not blank the
    traceback torchrun prints (nor replace the fuller one torch's ``@record`` wrote)."""
    script = tmp_path / "fails.py"
    script.write_text(
        "from torch.distributed.elastic.multiprocessing.errors import record\n"
        "import trainer.distributed.launch\n"
        f"{'@record' if with_record else ''}\n"
        "def main():\n"
        "    trainer.distributed.launch.watch_launcher()  # what every Trainer call does first\n"
        "    raise ValueError('boom: the real error')\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=1", "--standalone",
                           str(script)], capture_output=True, text=True, timeout=100, cwd=tmp_path, env=env)
    assert done.returncode != 0
    summary = done.stderr[done.stderr.index("Root Cause"):]
    assert "ValueError: boom: the real error" in summary and 'fails.py", line' in summary, summary
