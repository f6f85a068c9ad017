"""``Trainer(spike_recovery=...)`` in one process: the bundled GPT with poisoned batches (trainer/examples/poisoned.py)
finishes, no poisoned batch reaches the weights, the loss ends within a clean run's noise; the record survives a
resume; too many recoveries stop the run with the steps and batches named. DDP and FSDP: tests/distributed/
test_spike_recovery_ddp.py.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from trainer import Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint
from trainer.examples.poisoned import BLOW_UP, NON_FINITE, PoisonedGPT, PoisonedSorting, poisoned_batches
from trainer.loops.nonfinite import NonFiniteLossError

BATCH, STEPS = 8, 40
TINY = {"vocab_size": 11, "block_size": 12, "n_layer": 1, "n_head": 2, "n_embd": 16, "warmup_steps": 5,
        "max_steps": STEPS, "lr": 5e-3}
RECOVERY = {"snapshot_every_n_steps": 5, "min_history": 5, "window": 20}


def fit(poisoned: dict[int, int], tmp_path=None, spike_recovery=RECOVERY, max_steps=STEPS, ckpt_path=None,
        callbacks=(), logger=False) -> tuple[PoisonedGPT, Trainer]:
    seed_everything(0)
    model = PoisonedGPT(**TINY)
    trainer = Trainer(accelerator="cpu", max_steps=max_steps, logger=logger, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=bool(callbacks), callbacks=list(callbacks),
                      spike_recovery=spike_recovery, default_root_dir=tmp_path)
    data = PoisonedSorting(BATCH * (STEPS + 30), BATCH, poisoned)
    trainer.fit(model, DataLoader(data, batch_size=BATCH), ckpt_path=ckpt_path)
    return model, trainer


def last_losses(model: PoisonedGPT, n: int = 10) -> list[float]:
    kept = dict(model.losses)  # a step trained again after a rollback: its kept loss is the later one
    return [kept[s] for s in sorted(kept)[-n:]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    poisoned = poisoned_batches(seed=3, num_batches=STEPS, count=3, first=10)
    path = tmp_path_factory.mktemp("spike")
    ckpt = ModelCheckpoint(dirpath=path / "ckpt", save_last=True, every_n_train_steps=STEPS)
    from trainer.loggers import CSVLogger

    healed, trainer = fit(poisoned, path, callbacks=[ckpt], logger=CSVLogger(str(path), name="csv"))
    clean, _ = fit({})
    return poisoned, healed, trainer, clean, path


def test_poisoned_run_finishes_without_a_poisoned_update_and_within_the_clean_runs_noise(runs, capsys):
    poisoned, healed, trainer, clean, _ = runs
    assert sorted(poisoned.values()) == [BLOW_UP, BLOW_UP, NON_FINITE]
    assert trainer.global_step == STEPS
    assert not healed.canary.weight.any()  # no poisoned batch's update is in the weights
    assert all(torch.isfinite(p).all() for p in healed.parameters())
    spike = next(cb for cb in trainer.callbacks if type(cb).__name__ == "SpikeRecovery")
    assert [(r["epoch"], r["batch"]) for r in spike.recoveries] == [(0, b) for b in sorted(poisoned)]
    assert {r["reason"].split(" (")[0] for r in spike.recoveries} == {"loss spike", "non-finite loss"}
    for record, batch in zip(spike.recoveries, sorted(poisoned)):
        first, last = record["skipped"]["first"], record["skipped"]["last"]
        assert first[1] <= batch == last[1]  # the skipped range ends with the poisoned batch
    ref, got = last_losses(clean), last_losses(healed)
    noise = statistics.stdev(ref)
    assert abs(statistics.mean(got) - statistics.mean(ref)) <= 3 * noise, (got, ref)
    assert trainer.stop_on_nonfinite_loss is True  # handed back after the fit
    logged = (Path(trainer.logger.log_dir) / "metrics.csv").read_text()
    assert {"healing/recoveries", "healing/steps_undone", "healing/skipped_batches", "healing/spike_loss"} <= set(
        logged.splitlines()[0].split(","))


def test_the_checkpoint_records_the_skipped_batches_and_a_resume_continues_after_them(runs, capsys):
    poisoned, _, _, _, path = runs
    saved = torch.load(path / "ckpt" / "last.ckpt", weights_only=True)
    state = next(v for k, v in saved["callbacks"].items() if k.startswith("SpikeRecovery"))
    assert [r["batch"] for r in state["recoveries"]] == sorted(poisoned)
    assert saved["loops"]["batches_seen"] > max(poisoned)  # the position is past every skipped batch
    capsys.readouterr()
    resumed, again = fit(poisoned, path, max_steps=STEPS + 3, ckpt_path=str(path / "ckpt" / "last.ckpt"))
    spike = next(cb for cb in again.callbacks if type(cb).__name__ == "SpikeRecovery")
    assert len(spike.recoveries) == len(poisoned)  # none replayed, none found again
    assert "the checkpoint records 3 recovery(ies)" in capsys.readouterr().out
    assert not resumed.canary.weight.any() and again.global_step == STEPS + 3


def test_too_many_recoveries_stop_with_the_steps_and_batches_named():
    from trainer.healing import SpikeRecoveryError

    seed_everything(0)
    model = PoisonedGPT(**TINY)
    trainer = Trainer(accelerator="cpu", max_steps=20, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False,
                      spike_recovery={**RECOVERY, "max_recoveries": 1})
    data = PoisonedSorting(BATCH * 30, BATCH, {12: NON_FINITE, 16: NON_FINITE})
    with pytest.raises(SpikeRecoveryError, match=r"2 recoveries within 1000 batches \(at most 1\): step .*batch 12"):
        trainer.fit(model, DataLoader(data, batch_size=BATCH))
    assert all(torch.isfinite(p).all() for p in model.parameters())  # left at the last good state


def test_off_by_default_a_non_finite_loss_still_stops():
    with pytest.raises(NonFiniteLossError):
        fit({3: NON_FINITE}, spike_recovery=None, max_steps=6)


def test_learning_rate_scaled_for_the_steps_after_a_recovery(tmp_path):
    seen: list[float] = []

    class Watch(ModelCheckpoint):  # any callback: records the lr the optimizer steps with (inside its step)
        def on_before_optimizer_step(self, trainer, pl_module, optimizer):
            seen.append(optimizer.param_groups[0]["lr"])

    recovery = {**RECOVERY, "lr_scale": 0.5, "lr_scale_steps": 2}
    model, trainer = fit({12: NON_FINITE}, tmp_path, spike_recovery=recovery, max_steps=14,
                         callbacks=[Watch(dirpath=tmp_path, save_last=False)])
    plain = [trainer.lr_scheduler_configs[0].scheduler.lr_lambdas[0](s) * TINY["lr"] for s in range(14)]
    # steps 10, 11 follow the rollback to step 10 (the snapshot): half the schedule's rate, then the schedule's
    scaled = seen[-4:]
    assert scaled[0] == pytest.approx(plain[10] * 0.5) and scaled[1] == pytest.approx(plain[11] * 0.5)
    assert scaled[2] == pytest.approx(plain[12]) and scaled[3] == pytest.approx(plain[13])
    assert not model.canary.weight.any()


def test_arguments_are_checked():
    from trainer.errors import MisconfigurationError

    with pytest.raises(MisconfigurationError, match="spike_recovery"):
        Trainer(spike_recovery="yes", logger=False)
    with pytest.raises(MisconfigurationError, match="snapshot_every_n_steps"):
        Trainer(spike_recovery={"snapshot_every_n_steps": 0}, logger=False)


def test_the_cli_turns_it_on_by_default_and_hydra_keys_reach_it():
    from trainer.cli.check import compose_checked
    from trainer.cli.job import build_trainer
    from trainer.cli.resources import configs_dir
    from trainer.healing import SpikeRecovery, StragglerDetector

    default = build_trainer(compose_checked(str(configs_dir()), "config", ["logger=none"]))
    assert [type(cb) for cb in default.callbacks].count(SpikeRecovery) == 1
    cfg = compose_checked(str(configs_dir()), "config", [
        "logger=none", "trainer.spike_recovery={snapshot_every_n_steps:20,lr_scale:0.5,lr_scale_steps:10}",
        "callbacks=[default,straggler_detector]", "callbacks.straggler_detector.factor=2.0"])
    trainer = build_trainer(cfg)
    spike = next(cb for cb in trainer.callbacks if isinstance(cb, SpikeRecovery))
    assert (spike.snapshot_every, spike.lr_scale, spike.lr_scale_steps) == (20, 0.5, 10)
    assert next(cb for cb in trainer.callbacks if isinstance(cb, StragglerDetector)).factor == 2.0
    off = build_trainer(compose_checked(str(configs_dir()), "config", ["logger=none", "trainer.spike_recovery=false"]))
    assert not any(isinstance(cb, SpikeRecovery) for cb in off.callbacks) and off.stop_on_nonfinite_loss
    for value, kept in (("[3,5]", (3, 5)), ("auto", "auto")):
        cfg = compose_checked(str(configs_dir()), "config", ["logger=none", f"trainer.rank_batch_sizes={value}"])
        assert build_trainer(cfg).args.rank_batch_sizes == kept


@pytest.mark.cuda
def test_a_snapshot_of_a_cuda_model_round_trips():
    from plugins.apply_func import optimizer_state_to
    from trainer.healing import TrainingSnapshot

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    seed_everything(0)
    model = PoisonedGPT(**TINY)
    trainer = Trainer(accelerator="cuda", devices=1, max_steps=3, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False, spike_recovery=RECOVERY)
    trainer.fit(model, DataLoader(PoisonedSorting(BATCH * 8, BATCH, {}), batch_size=BATCH))
    model.cuda()  # the fit's end moved the module and its optimizer's state to the CPU (as Lightning): back again
    for optimizer in trainer.optimizers:
        optimizer_state_to(optimizer, "cuda")
    snapshot = TrainingSnapshot()
    snapshot.take(trainer, (0, 0, 0))
    before = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    snapshot.restore(trainer)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    # every copy of a CUDA tensor sits in pinned memory (so it is copied without waiting); CPU tensors such as
    # Adam's step count are copied as they are
    cuda_copies = [saved for live, saved in snapshot.module if live.is_cuda]
    for optimizer, (_, states) in zip(trainer.optimizers, snapshot.optimizers):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for param, saved in zip(params, states):
            live = optimizer.state.get(param, {})
            cuda_copies += [saved[k] for k, v in live.items() if isinstance(v, torch.Tensor) and v.is_cuda]
    assert len(cuda_copies) > len(snapshot.module) and all(c.is_pinned() for c in cuda_copies)



def test_a_non_finite_gradient_with_a_finite_loss_is_recovered_from_with_watch_grad_norm():
    from trainer import Module

    class Sqrt(Module):
        """Batch 6's loss is sqrt(0) = 0 for a zero parameter: finite, with an infinite gradient."""

        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(2, 1)
            self.zero = torch.nn.Parameter(torch.zeros(()))

        def training_step(self, batch, batch_idx):
            loss = self.net(batch[0]).pow(2).mean()
            return loss + torch.sqrt(self.zero) if batch_idx == 6 else loss + 0 * self.zero

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    model = Sqrt()
    trainer = Trainer(accelerator="cpu", max_steps=10, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False,
                      spike_recovery={"snapshot_every_n_steps": 4, "watch_grad_norm": True})
    trainer.fit(model, DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 2)), batch_size=4))
    spike = next(cb for cb in trainer.callbacks if type(cb).__name__ == "SpikeRecovery")
    assert [(r["batch"], r["reason"]) for r in spike.recoveries] == [(6, "non-finite gradient norm")]
    assert model.zero.item() == 0.0 and torch.isfinite(model.net.weight).all()
