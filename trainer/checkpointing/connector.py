"""Lightning's checkpoint connector (the Trainer's ``_checkpoint_connector``): the two calls code written for Lightning makes on it, although it is
Lightning's internal: ``dump_checkpoint`` (MLflow's ``mlflow.pytorch.autolog`` builds its checkpoints with it, on rank
0 only, to avoid ``save_checkpoint``'s barrier) and ``hpc_save_path``. The rest of Lightning's connector is not
Relay's (``trainer/checkpointing/`` saves and restores; resume with ``fit(ckpt_path=...)``)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from plugins.remote_paths import join, listdir

if TYPE_CHECKING:
    from trainer.trainer import Trainer


class CheckpointConnector:
    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    def dump_checkpoint(self, weights_only: bool | None = None) -> dict[str, object]:
        """What ``trainer.save_checkpoint`` writes, as a dict (the callbacks' and module's ``on_save_checkpoint``
        run, as in Lightning); collective-free for the strategies that keep a whole module per process."""
        from trainer.checkpointing.contents import collect_checkpoint  # local import: loads with the first save

        return collect_checkpoint(self.trainer, bool(weights_only))

    @staticmethod
    def hpc_save_path(folderpath: str | os.PathLike) -> str:
        """``<folder>/hpc_ckpt_<n>.ckpt``, ``n`` one more than the highest there (Lightning's name for SLURM saves)."""
        found = [int(m.group(1)) for name in listdir(folderpath)
                 if (m := re.fullmatch(r"hpc_ckpt_(\d+)\.ckpt", os.path.basename(name)))]
        return join(str(folderpath), f"hpc_ckpt_{max(found, default=0) + 1}.ckpt")
