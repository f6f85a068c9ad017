"""Lightning's ``storage_options`` argument of ``Trainer.save_checkpoint``, which Relay's writing does not take.
(``weights_only`` of ``fit``/``validate``/``test``/``predict`` is ``plugins.checkpoint_io.trusted_loads``.)"""

from __future__ import annotations


def check_storage_options(storage_options: object) -> None:
    if storage_options is not None:
        raise TypeError("Trainer.save_checkpoint(..., storage_options=...): Relay's checkpoint writing takes no "
                        "storage options (set a filesystem's options through an fsspec URL); leave it None.")
