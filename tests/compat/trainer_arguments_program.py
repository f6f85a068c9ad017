"""What a user reads back from a Trainer built with default and time-based arguments (Lightning's docs:
``Trainer`` API reference, "val_check_interval ... pass a string 'DD:HH:MM:SS', a timedelta or a dict").

``python trainer_arguments_program.py lightning|relay``; prints one JSON object (tests/compat/lightning_diff/harness.py).
"""

from __future__ import annotations

import os
import sys
import warnings
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.compat.lightning_diff.common import exception, quiet
from tests.compat.lightning_diff.frameworks import load
from tests.compat.lightning_diff.harness import emit

READ = ["max_epochs", "min_epochs", "max_steps", "min_steps", "check_val_every_n_epoch", "num_sanity_val_steps",
        "log_every_n_steps", "accumulate_grad_batches", "gradient_clip_val", "gradient_clip_algorithm",
        "fast_dev_run", "overfit_batches", "reload_dataloaders_every_n_epochs", "num_nodes", "precision",
        "limit_train_batches", "limit_val_batches", "limit_test_batches", "limit_predict_batches",
        "val_check_interval", "barebones", "enable_autolog_hparams"]
TIMES = {"string": "00:00:10:00", "dict": {"minutes": 10}, "timedelta": timedelta(seconds=30),
         "days": "01:02:03:04"}


def main(framework: str) -> None:
    warnings.filterwarnings("ignore")
    fw = load(framework)
    trainer = fw.Trainer(**quiet())
    result = {"defaults": {name: getattr(trainer, name, "<not set>") for name in READ},
              "default_root_dir_is_cwd": trainer.default_root_dir == os.getcwd()}
    for key, value in TIMES.items():
        for every in (1, None):
            made = fw.Trainer(**quiet(val_check_interval=value, check_val_every_n_epoch=every))
            result[f"time_{key}_{every}"] = made._val_check_time_interval
    result["time_under_fast_dev_run"] = fw.Trainer(**quiet(val_check_interval="00:00:10:00",
                                                            fast_dev_run=2))._val_check_time_interval
    for key, value in {"bad_string": "10:00", "bad_dict_key": {"minute": 1}, "fraction_without_epochs": 0.5}.items():
        try:
            fw.Trainer(**quiet(val_check_interval=value, check_val_every_n_epoch=None))
            result[key] = "accepted"
        except Exception as err:  # noqa: BLE001 (the exception is the observation)
            result[key] = exception(err)
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1])
