"""Lightning's ``weights_only`` argument of ``fit``/``validate``/``test``/``predict``: Relay always reads a checkpoint
with ``torch.load(weights_only=True)`` (a checkpoint is data, never code), so ``None`` and ``True`` are accepted
and ``False`` is refused in one line."""

from __future__ import annotations


def check_weights_only(method: str, weights_only: bool | None) -> None:
    if weights_only is not None and weights_only is not True:
        raise ValueError(f"Trainer.{method}(weights_only={weights_only!r}): Relay reads checkpoints with "
                         "torch.load(weights_only=True) only (a checkpoint is data, never code); leave it None or True.")


def check_storage_options(storage_options: object) -> None:
    if storage_options is not None:
        raise TypeError("Trainer.save_checkpoint(..., storage_options=...): Relay's checkpoint writing takes no "
                        "storage options (set a filesystem's options through an fsspec URL); leave it None.")
