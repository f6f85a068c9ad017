"""MkDocs hooks for Relay's site (mkdocs.yml names this file).

- The configuration reference (``reference/configuration.md``) is generated from ``configs/`` and the typed Trainer
  schema at every build (docs/make_config_reference.py), so it cannot fall behind the configs.
- Nav entries for pages that are written on other branches (``OPTIONAL_PAGES``) are dropped while the page is not in
  the tree, so ``mkdocs build --strict`` passes before and after they land; any other missing page stays an error.
- A page in docs/ that the nav does not name yet is added at the end of the how-to guides, under its first heading,
  so a new page is never left out of the site (give it its place in mkdocs.yml's nav).
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


def _named(nav: list) -> set[str]:
    names = set()
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        names |= _named(value) if isinstance(value, list) else {value}
    return names


def _title(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").capitalize()


def _add_unnamed(nav: list, docs: Path) -> list:
    named = _named(nav) | {GENERATED}
    extra = [{_title(p): p.relative_to(docs).as_posix()} for p in sorted(docs.rglob("*.md"))
             if p.relative_to(docs).as_posix() not in named]
    for entry in nav:
        if isinstance(entry, dict) and "How-to guides" in entry and extra:
            entry["How-to guides"] = [*entry["How-to guides"], *extra]
            return nav
    return nav + extra


def on_config(config, **kwargs):
    config["nav"] = _add_unnamed(_prune(config["nav"]), DOCS)
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
