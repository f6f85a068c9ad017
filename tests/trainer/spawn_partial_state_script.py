"""tests/trainer/test_module_members.py's ddp_spawn case: a run with ``strict_loading=False`` brings the workers'
weights back into a module whose checkpoint lacks the frozen backbone; a strict one refuses (a plain script, so
the tests fork it and its spawn children from the warm interpreter: tests/forked_programs.py)."""

import torch

from tests.helpers import loader, quiet
from tests.trainer.test_module_members import WithFrozenBackbone
from trainer import Trainer


def run(model):
    Trainer(**quiet(max_epochs=1, accelerator="cpu", strategy="ddp_spawn", devices=2)).fit(model, loader())


if __name__ == "__main__":  # spawn's children import this file again
    model = WithFrozenBackbone(strict=False)
    before = model.head.weight.detach().clone()
    run(model)
    print("head trained:", not torch.equal(before, model.head.weight))
    try:
        run(WithFrozenBackbone())
    except RuntimeError as err:
        print("strict:", "Missing key" in str(err))
