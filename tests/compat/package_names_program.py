"""What a program written against ``pytorch_lightning`` and ``lightning_fabric`` (the standalone packages' names)
observes, on Lightning 2.6.6 and on Relay's zero-edit mode. Each check is a pattern lightly-train 0.18.0 relies on:
a type alias imported from a connector module, loggers subclassed through Lightning's private members, a filter on
``pytorch_lightning.utilities.rank_zero`` (and what a Trainer logs there when made), torch's
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` around ``Fabric.load``, Fabric's wrappers' names, a module's ``device`` under a
stand-in trainer.

``python package_names_program.py lightning|relay``: one JSON dict (tests/compat/lightning_diff/harness.py), compared
by tests/compat/test_package_names.py.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from unittest.mock import Mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import pytorch_lightning as pl  # noqa: E402
from lightning_fabric import Fabric  # noqa: E402
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger  # noqa: E402
from pytorch_lightning.loggers.csv_logs import ExperimentWriter  # noqa: E402

ROOT = Path(tempfile.mkdtemp(prefix="package-names-"))


class Regression(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 2, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


def precision_alias() -> dict:
    """A type alias one Lightning module imports from another, imported from the importer."""
    from pytorch_lightning.trainer.connectors.accelerator_connector import _PRECISION_INPUT
    from lightning_fabric.connector import _PRECISION_INPUT as fabric_alias

    return {"same": _PRECISION_INPUT == fabric_alias, "text": str(_PRECISION_INPUT).replace("typing.", "")}


class JSONLWriter(ExperimentWriter):
    """lightly-train's writer: one JSON line per row, through Lightning's ``_fs``."""

    NAME_METRICS_FILE = "metrics.jsonl"

    def save(self) -> None:
        if not self.metrics:
            return
        mode = "a" if self._fs.isfile(self.metrics_file_path) else "w"
        with self._fs.open(self.metrics_file_path, mode=mode) as file:
            file.writelines(f"{json.dumps(row)}\n" for row in self.metrics)
        self.metrics = []


class JSONLLogger(CSVLogger):
    @property
    def experiment(self) -> JSONLWriter:
        if self._experiment is None:
            os.makedirs(self._root_dir, exist_ok=True)
            self._experiment = JSONLWriter(log_dir=self.log_dir)
        return self._experiment


class NoHparamsFile(TensorBoardLogger):
    """lightly-train's TensorBoard logger: the hparams file removed after each save, through ``_fs``."""

    def save(self) -> None:
        super().save()
        path = os.path.join(self.log_dir, self.NAME_HPARAMS_FILE)
        if self._fs.isfile(path):
            self._fs.rm(path)


def logger_subclasses() -> dict:
    jsonl = JSONLLogger(ROOT / "jsonl", name="run", version=0, flush_logs_every_n_steps=2)
    board = NoHparamsFile(ROOT / "tb", name="run", version=0, log_graph=False, comment="c")
    trainer = pl.Trainer(accelerator="cpu", max_steps=4, logger=[jsonl, board], log_every_n_steps=1,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    model = Regression()
    model.save_hyperparameters({"lr": 0.1})
    trainer.fit(model, loader())
    rows = [json.loads(line) for line in Path(jsonl.log_dir, "metrics.jsonl").read_text().splitlines()]
    return {
        "jsonl_steps": [row["step"] for row in rows],
        "jsonl_keys": sorted({key for row in rows for key in row}),
        "flush_every": jsonl._flush_logs_every_n_steps,
        "root_dirs": [os.path.relpath(jsonl._root_dir, ROOT), os.path.relpath(board._root_dir, ROOT)],
        "filesystems": [type(jsonl._fs).__name__, type(board._fs).__name__, type(jsonl.experiment._fs).__name__],
        "writer_kwargs": board._kwargs,
        "tb_files": sorted(p.name.split(".")[0] for p in Path(board.log_dir).iterdir()),
    }


class DropFloat32Advice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "set_float32_matmul_precision" not in record.getMessage()


def _records(action) -> list[tuple[str, str]]:
    """The log records ``action()`` makes, as (logger name, message), seen from the root logger."""
    seen: list[tuple[str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.name, record.getMessage()))

    root = logging.getLogger()
    handler = Keep(level=logging.DEBUG)
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.DEBUG)
    logging.getLogger("pytorch_lightning").propagate = True
    try:
        action()
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    return seen


def rank_zero_logger_name() -> dict:
    """A filter on ``pytorch_lightning.utilities.rank_zero`` sees ``rank_zero_info``'s records (lightly-train's)."""
    from pytorch_lightning.utilities import rank_zero_info

    logging.getLogger("pytorch_lightning.utilities.rank_zero").addFilter(DropFloat32Advice())

    def log() -> None:
        rank_zero_info("set_float32_matmul_precision advice")
        rank_zero_info("kept")

    return {"records": _records(log)}


def lines_when_a_trainer_is_made() -> dict:
    def make() -> None:
        pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)

    return {"records": [r for r in _records(make) if "available" in r[1]]}


class Opaque:
    """Not plain data: a data-only read refuses it."""


def fabric_load_with_torch_opt_out() -> dict:
    fabric = Fabric(accelerator="cpu", devices=1)
    path = ROOT / "opaque.ckpt"
    fabric.save(path, {"thing": Opaque(), "step": 3})
    out = {}
    try:
        fabric.load(path)
        out["without"] = "loaded"
    except Exception:  # torch's UnpicklingError on Lightning, Relay's CheckpointReadError naming the file
        out["without"] = "refused"
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        loaded = fabric.load(path)
        out["with"] = [type(loaded["thing"]).__name__, loaded["step"]]
    finally:
        del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
    return out


def fabric_wrappers() -> dict:
    """The set-up objects' class names and the module's parameter names (lightly-train's NaN capture reads both)."""
    fabric = Fabric(accelerator="cpu", devices=1)
    model, optimizer = fabric.setup(torch.nn.Sequential(torch.nn.Linear(2, 2)), torch.optim.SGD([torch.zeros(1)]))
    batches = fabric.setup_dataloaders(loader())
    return {"classes": [type(x).__name__ for x in (model, optimizer, batches)],
            "parameters": [name for name, _ in model.named_parameters()],
            "modules": [name for name, _ in model.named_modules()]}


def device_under_a_stand_in_trainer() -> dict:
    model = Regression()
    model.trainer = Mock()
    return {"device": str(model.device)}


if __name__ == "__main__":
    run_checks([precision_alias, logger_subclasses, rank_zero_logger_name, lines_when_a_trainer_is_made,
                fabric_load_with_torch_opt_out, fabric_wrappers, device_under_a_stand_in_trainer], root=ROOT)
