"""``python -m trainer init NAME``: a starter project in ./NAME from ``templates/project``.

The template's placeholder ``__project__`` (a directory name and a word in files) becomes NAME.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from trainer.cli.resources import templates_dir

PLACEHOLDER = "__project__"
_SKIP = ("__pycache__", ".pytest_cache", "outputs")


def create_project(name: str, parent: Path) -> Path:
    """Copy the template to ``parent/name`` with the placeholder replaced; errors if it cannot."""
    if not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"init {name!r}: the name is also the Python package name, so use letters, digits and "
                         "underscores, not starting with a digit or underscore (e.g. my_project).")
    target = parent / name
    if target.exists():
        raise ValueError(f"init {name}: {target} already exists; pick another name or remove it.")
    source = templates_dir() / "project"
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_dir() or any(part in _SKIP for part in rel.parts) or path.suffix == ".pyc":
            continue
        out = target / Path(*(part.replace(PLACEHOLDER, name) for part in rel.parts))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(path.read_text().replace(PLACEHOLDER, name))
        shutil.copymode(path, out)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m trainer init NAME   (creates ./NAME, a starter project)", file=sys.stderr)
        return 2
    try:
        target = create_project(argv[0], Path.cwd())
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"created {target}\nnext: cd {argv[0]} && python train.py experiment=smoke && python -m pytest -q")
    return 0
