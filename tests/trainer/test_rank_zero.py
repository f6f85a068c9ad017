"""``rank_zero_only.rank`` is set on import (from the launcher's variables) and follows the strategy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("from trainer import {name}\n"
         "from lightning_utilities.core.rank_zero import rank_zero_only\n"
         "print(rank_zero_only.rank)")


@pytest.mark.parametrize("env, expected", [({}, 0), ({"RANK": "2"}, 2), ({"SLURM_PROCID": "5"}, 5)])
@pytest.mark.parametrize("name", ["Module", "Trainer"])
def test_rank_set_on_import(name, env, expected):
    ranks = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
    clean = {k: v for k, v in os.environ.items() if k not in ranks}
    out = subprocess.run([sys.executable, "-c", PROBE.format(name=name)], env={**clean, **env}, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.split()[-1] == str(expected)


def test_trainer_sets_the_strategys_rank():
    from lightning_utilities.core.rank_zero import rank_zero_only

    from trainer import Trainer

    rank_zero_only.rank = 7
    Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert rank_zero_only.rank == 0
