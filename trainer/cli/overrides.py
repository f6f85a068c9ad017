"""Overrides rewritten before Hydra sees them: Lightning's precision names, and resuming in place.

``precision=16`` is what a Lightning user types (and what ``Trainer(precision=16)`` accepts), but Hydra
reads 16 as an int and has no config file called ``16``; it becomes ``precision=16-mixed``. With
``ckpt_path=last`` the run continues in the directory of the run it resumes, so its TensorBoard curves
go on in the same event directory and show as one curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from plugins.builtin import PRECISION_ALIASES
from trainer.checkpointing.files import newest_checkpoint

if TYPE_CHECKING:
    from omegaconf import DictConfig


def canonical_precision(argv: Sequence[str]) -> list[str]:
    """``precision=16`` / ``precision=bf16,32`` -> the registered names (``16-mixed``, ``bf16-mixed,32-true``)."""
    out = []
    for item in argv:
        key, sep, value = item.partition("=")
        if sep and key.lstrip("+") == "precision" and value:
            names = [PRECISION_ALIASES.get(v.strip().strip("'\""), v) for v in value.split(",")]
            item = f"{key}={','.join(names)}"
        out.append(item)
    return out


def run_dir_of(checkpoint: Path, output_root: Path) -> Path | None:
    """The run directory (the one holding ``.hydra/``) a checkpoint under ``output_root`` belongs to."""
    root = output_root.resolve()
    for parent in checkpoint.resolve().parents:
        if (parent / ".hydra").is_dir():
            return parent
        if parent == root:
            return None
    return None


def resume_in_place(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """``hydra.run.dir=<the resumed run's directory>`` for ``ckpt_path=last`` (unless the run dir is given)."""
    if str(cfg.get("ckpt_path")) != "last" or any(o.lstrip("+").startswith("hydra.run.dir=") for o in overrides):
        return []
    output_root = Path(str(cfg.get("output_root") or "."))
    found = newest_checkpoint([output_root], recursive=True)
    run_dir = run_dir_of(found, output_root) if found is not None else None
    if run_dir is None:
        return []
    return [f"hydra.run.dir='{run_dir}'"]
