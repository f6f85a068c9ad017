"""BatchSizeFinder as a plain callback in validate/test: the evaluation goes on with loaders of the size found.

``python batch_size_eval_program.py lightning|relay``; tests/compat/test_batch_size_eval.py compares the two.
"""

import sys, json
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch
from torch.utils.data import DataLoader, TensorDataset
from tests.compat.lightning_diff.frameworks import load
from tests.compat.lightning_diff.harness import emit
fw = load(sys.argv[1])
if fw.name == "lightning":
    from lightning.pytorch.callbacks import BatchSizeFinder
else:
    from trainer.callbacks import BatchSizeFinder

class M(fw.Module):
    def __init__(self, batch_size=2):
        super().__init__()
        self.batch_size = batch_size
        self.layer = torch.nn.Linear(1, 1)
        self.sizes = []
    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(64, 1)), batch_size=self.batch_size)
    test_dataloader = val_dataloader
    def validation_step(self, batch, batch_idx):
        if batch[0].shape[0] > 12:
            raise RuntimeError("CUDA out of memory.")
        self.sizes.append(batch[0].shape[0])
    test_step = validation_step
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

out = {}
for stage in ("validate", "test"):
    m = M()
    t = fw.Trainer(callbacks=[BatchSizeFinder(mode="power", steps_per_trial=1)], logger=False, enable_progress_bar=False,
                   enable_model_summary=False, enable_checkpointing=False, default_root_dir="out")
    getattr(t, stage)(m, verbose=False)
    out[stage] = {"batch_size": m.batch_size, "last_sizes": m.sizes[-6:], "n": len(m.sizes)}
emit(out)
