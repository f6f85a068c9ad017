"""MkDocs hooks for Relay's site (mkdocs.yml names this file).

- The configuration reference (``reference/configuration.md``) is generated from ``configs/`` and the typed Trainer
  schema at every build (docs/make_config_reference.py), so it cannot fall behind the configs.
- Nav entries for pages that are written on other branches (``OPTIONAL_PAGES``) are dropped while the page is not in
  the tree, so ``mkdocs build --strict`` passes before and after they land; any other missing page stays an error.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OPTIONAL_PAGES = {"healing.md", "large_models_training.md", "large_models_data.md", "lightning_conformance.md"}
GENERATED = "reference/configuration.md"


def _present(entry) -> bool:
    if isinstance(entry, str):
        return entry not in OPTIONAL_PAGES or (DOCS / entry).is_file()
    if isinstance(entry, dict):
        ((_, value),) = entry.items()
        return _present(value)
    return True


def _prune(nav: list) -> list:
    kept = []
    for entry in nav:
        if isinstance(entry, dict):
            ((title, value),) = entry.items()
            if isinstance(value, list):
                kept.append({title: _prune(value)})
                continue
        if _present(entry):
            kept.append(entry)
    return kept


def on_config(config, **kwargs):
    config["nav"] = _prune(config["nav"])
    return config


def _config_reference() -> str:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the tree being documented, not an installed copy
    spec = importlib.util.spec_from_file_location("make_config_reference", DOCS / "make_config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render()


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    files.append(File.generated(config, GENERATED, content=_config_reference()))
    return files
