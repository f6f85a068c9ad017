"""Where the shipped configs and templates are, for an editable install and a wheel alike."""

from __future__ import annotations

from pathlib import Path


def configs_dir() -> Path:
    """The Hydra config tree (``configs/`` in the repository, ``trainer/configs`` in the wheel)."""
    import importlib.resources

    return Path(str(importlib.resources.files("trainer.configs")))


def templates_dir() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files("trainer.templates")))
