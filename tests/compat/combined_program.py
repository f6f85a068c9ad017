"""CombinedLoader and collections of loaders as Trainer input, observed the same way on Lightning and Relay.

``python combined_program.py lightning|relay``; tests/compat/test_combined_trainer.py compares the two.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tests.compat.lightning_diff.frameworks import load  # noqa: E402
from tests.compat.lightning_diff.harness import emit  # noqa: E402

fw = load(sys.argv[1])
if fw.name == "lightning":
    from lightning.pytorch.utilities import CombinedLoader
else:
    from trainer.utilities import CombinedLoader
QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
             num_sanity_val_steps=0)


def dl(n: int, start: int = 0, batch_size: int = 2) -> DataLoader:
    x = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(1)
    return DataLoader(TensorDataset(x), batch_size=batch_size)


def describe(batch):
    if batch is None:
        return None
    if isinstance(batch, dict):
        return {k: describe(v) for k, v in sorted(batch.items())}
    if isinstance(batch, (list, tuple)):
        return [describe(v) for v in batch]
    return batch.flatten().tolist()


class Recorder(fw.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen = []

    def _loss(self, batch):
        tensors = [t for t in torch.utils._pytree.tree_leaves(batch) if isinstance(t, torch.Tensor)]
        return sum(self.layer(t).pow(2).mean() for t in tensors)

    def training_step(self, batch, batch_idx):
        self.seen.append(["train", batch_idx, describe(batch)])
        return self._loss(batch)

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.seen.append(["val", batch_idx, dataloader_idx, describe(batch)])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def fit(train, **kwargs):
    model = Recorder()
    trainer = fw.Trainer(max_epochs=1, limit_val_batches=0, **QUIET, **kwargs)
    trainer.fit(model, train_dataloaders=train)
    return {"seen": model.seen, "steps": trainer.global_step, "batches": trainer.num_training_batches}


def validate(loaders):
    model = Recorder()
    trainer = fw.Trainer(**QUIET)
    trainer.validate(model, dataloaders=loaders, verbose=False)
    return {"seen": model.seen, "counts": list(trainer.num_val_batches)}


result = {
    "dict_of_loaders": fit({"a": dl(8), "b": dl(4, 100)}),
    "list_of_loaders": fit([dl(6), dl(10, 50)]),
    "min_size": fit(CombinedLoader({"a": dl(8), "b": dl(4, 100)}, "min_size")),
    "max_size": fit(CombinedLoader([dl(6), dl(2, 100)], "max_size")),
    "max_size_cycle_limited": fit(CombinedLoader({"a": dl(8), "b": dl(4, 100)}, "max_size_cycle"),
                                  limit_train_batches=3),
    "sequential_validate": validate(CombinedLoader([dl(4), dl(6, 10)], "sequential")),
    "max_size_validate": validate(CombinedLoader({"x": dl(4), "y": dl(2, 10)}, "max_size")),
}
emit(result)
