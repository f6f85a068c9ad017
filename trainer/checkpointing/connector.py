"""Lightning's checkpoint connector (the Trainer's ``_checkpoint_connector``): the calls code written for Lightning
makes on it, although it is Lightning's internal: ``dump_checkpoint`` (MLflow's ``mlflow.pytorch.autolog`` builds its
checkpoints with it, on rank 0 only, to avoid ``save_checkpoint``'s barrier), ``restore`` and the SLURM save names
(``hpc_save_path``; Lightning's test helpers also call its private folder helpers by their mangled names). Relay's
own saving and restoring is ``trainer/checkpointing/`` (resume with ``fit(ckpt_path=...)``)."""

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

    def restore(self, checkpoint_path: str | os.PathLike | None = None) -> None:
        """A checkpoint put back outside a Trainer call (Lightning's test helpers do it after a fit): the module's
        weights and the callbacks' states, then, when the Trainer last fitted and still holds its optimizers, the
        training state (optimizers, schedulers, loop counts), through the same phases as ``fit(ckpt_path=...)``."""
        from trainer.checkpointing.files import load_checkpoint  # local import: loads with the first restore
        from trainer.checkpointing.resume import Resume  # local import: as above

        if checkpoint_path is None:
            return
        trainer = self.trainer
        path = str(checkpoint_path)
        resume = Resume(path, load_checkpoint(path, trainer.strategy.checkpoint_io))
        resume.restore_weights(trainer, callbacks=True)
        if trainer.state.fn == "fit" and trainer.optimizers:
            resume.restore_training(trainer)

    @staticmethod
    def hpc_save_path(folderpath: str | os.PathLike) -> str:
        """``<folder>/hpc_ckpt_<n>.ckpt``, ``n`` one more than the highest there (Lightning's name for SLURM saves)."""
        highest = CheckpointConnector.__max_ckpt_version_in_folder(folderpath) or 0
        return join(str(folderpath), f"hpc_ckpt_{highest + 1}.ckpt")

    @staticmethod
    def __max_ckpt_version_in_folder(dir_path: str | os.PathLike, name_key: str = "ckpt_") -> int | None:
        """The highest ``n`` of the ``*<name_key><n>.ckpt`` files in a folder, None when there is none or no folder
        (Lightning's private helper, which its test helpers call by its mangled name)."""
        try:
            names = [os.path.basename(name) for name in listdir(dir_path)]
        except (FileNotFoundError, NotADirectoryError):
            return None
        found = [int(m.group(1)) for name in names if (m := re.search(rf"{re.escape(name_key)}(\d+)\.ckpt$", name))]
        return max(found, default=None)

    @staticmethod
    def __get_max_ckpt_path_from_folder(folder_path: str | os.PathLike) -> str:
        """``<folder>/hpc_ckpt_<highest>.ckpt`` (``hpc_ckpt_0.ckpt`` when there is none): the last SLURM save."""
        highest = CheckpointConnector.__max_ckpt_version_in_folder(folder_path) or 0
        return join(str(folder_path), f"hpc_ckpt_{highest}.ckpt")
