"""Weight averaging refuses sharded strategies, as Lightning: the averaged copy would be a full, unsharded model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from plugins.strategies.deepspeed import DeepSpeedStrategy
from plugins.strategies.fsdp import FSDPStrategy
from tests.helpers import Regression
from trainer.callbacks import BackboneFinetuning, EMAWeightAveraging, StochasticWeightAveraging
from trainer.errors import MisconfigurationError


@pytest.mark.parametrize("strategy", [FSDPStrategy, DeepSpeedStrategy])
@pytest.mark.parametrize("callback", [lambda: StochasticWeightAveraging(swa_lrs=0.1), EMAWeightAveraging])
def test_weight_averaging_refuses_sharded_strategies(strategy, callback):
    trainer = SimpleNamespace(strategy=strategy.__new__(strategy))  # only its type is read
    with pytest.raises(MisconfigurationError, match="does not currently support sharded models"):
        callback().setup(trainer, Regression(), "fit")


def test_finetuning_refuses_deepspeed():
    class Net(Regression):
        backbone = property(lambda self: self.layer)

    trainer = SimpleNamespace(strategy=DeepSpeedStrategy.__new__(DeepSpeedStrategy))
    with pytest.raises(NotImplementedError, match="does not support running with the DeepSpeed strategy"):
        BackboneFinetuning().setup(trainer, Net(), "fit")
