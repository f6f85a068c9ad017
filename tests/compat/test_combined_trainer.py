"""CombinedLoader and dicts/lists of loaders as fit and evaluation input, compared with Lightning 2.6.6: the batches
each step receives (shape, keys, ``None`` for an exhausted loader), ``batch_idx``/``dataloader_idx``, step and
batch counts; and Relay's exact mid-epoch resume with several loaders."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.optional import need
from trainer import Module, Trainer
from trainer.utilities import CombinedLoader

PROGRAM = Path(__file__).with_name("combined_program.py")
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def observed():
    need("lightning", "compared against a real Lightning run")
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=500)


@pytest.mark.parametrize("case", ["dict_of_loaders", "list_of_loaders", "min_size", "max_size",
                                  "max_size_cycle_limited", "sequential_validate", "max_size_validate"])
def test_batches_and_indices_match_lightning(observed, case):
    lightning, relay = observed
    assert relay[case] == lightning[case]


def test_the_expected_shapes_themselves(observed):
    _, relay = observed
    cycled = relay["dict_of_loaders"]
    assert cycled["steps"] == 4 and cycled["seen"][2][2] == {"a": [[4.0, 5.0]], "b": [[100.0, 101.0]]}  # b cycles
    assert relay["max_size"]["seen"][-1][2] == [[[4.0, 5.0]], None]
    assert [s[2] for s in relay["sequential_validate"]["seen"]] == [0, 0, 1, 1, 1]


class Pairs(Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        return sum(self.layer(batch[k][0]).pow(2).mean() for k in ("a", "b"))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loaders():
    def dl(n, start):
        x = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(1) / 100
        return DataLoader(TensorDataset(x), batch_size=2, shuffle=True)

    return {"a": dl(20, 0), "b": dl(6, 50)}


def fit(tmp_path, max_steps, ckpt_path=None):
    torch.manual_seed(0)
    trainer = Trainer(max_epochs=2, max_steps=max_steps, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, default_root_dir=tmp_path)
    model = Pairs()
    trainer.fit(model, loaders(), ckpt_path=ckpt_path)
    return model, trainer


def test_mid_epoch_resume_with_several_loaders_is_exact(tmp_path):
    """Stopped at step 7 (inside the first epoch, after loader b has cycled) and resumed: the same weights as an
    uninterrupted fit, so every loader continued where it was."""
    whole, _ = fit(tmp_path / "whole", -1)
    _, first = fit(tmp_path / "split", 7)
    first.save_checkpoint(tmp_path / "step7.ckpt")
    resumed, second = fit(tmp_path / "split", -1, ckpt_path=tmp_path / "step7.ckpt")
    assert second.global_step == 20
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_a_list_of_batches_is_still_one_loader():
    assert isinstance(CombinedLoader([[1, 2], [3]]).flattened[0], list)
