"""Time-based ``val_check_interval`` (a timedelta, "DD:HH:MM:SS" or a dict): validation runs after the first batch
at which that much time has passed since the last validation (or the start of training), as Lightning's rule."""

from __future__ import annotations

import time
from datetime import timedelta


from tests.helpers import Regression, loader
from trainer import Trainer
from trainer.callbacks import Callback


class Slow(Regression):
    def training_step(self, batch, batch_idx):
        time.sleep(0.05)
        return super().training_step(batch, batch_idx)


class Times(Callback):
    def __init__(self) -> None:
        self.train_start = 0.0
        self.validations: list[tuple[float, int]] = []

    def on_train_start(self, trainer, module):
        self.train_start = time.monotonic()

    def on_validation_start(self, trainer, module):
        if not trainer.sanity_checking:
            self.validations.append((time.monotonic(), trainer.global_step))


def test_validation_runs_when_the_interval_has_passed(tmp_path):
    times = Times()
    trainer = Trainer(max_epochs=1, val_check_interval=timedelta(seconds=0.25), callbacks=[times],
                      logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, default_root_dir=tmp_path)
    assert trainer.val_check_interval is None and trainer._val_check_time_interval == 0.25
    trainer.fit(Slow(), loader(n=256, batch_size=8), loader(n=16, batch_size=8))  # 32 batches of >= 50 ms
    starts = [times.train_start] + [t for t, _ in times.validations]
    assert 2 <= len(times.validations) < 32, times.validations  # by time: neither never nor after every batch
    assert all(later - earlier >= 0.25 for earlier, later in zip(starts, starts[1:]))
    steps = [s for _, s in times.validations]
    assert steps == sorted(set(steps)) and steps[-1] <= 32


def test_dict_and_string_forms_are_the_same_interval():
    assert Trainer(val_check_interval={"minutes": 10}, logger=False)._val_check_time_interval == 600.0
    assert Trainer(val_check_interval="00:00:10:00", logger=False)._val_check_time_interval == 600.0
