"""docs/lightning_api.md lists every public Lightning name it covers, and every 'supported' row imports from Relay."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tests.optional import need_mark

TABLE = Path(__file__).resolve().parents[2] / "docs" / "lightning_api.md"
ROW = re.compile(r"^\| `([^`]+)` \| (supported|difference|refused|planned) \|(?: `([^`]*)` \|)?")


def sections() -> dict[str, dict[str, tuple[str, str | None]]]:
    """``{heading: {name: (status, relay path or None)}}`` as the table states them."""
    out: dict[str, dict[str, tuple[str, str | None]]] = {}
    current = None
    for line in TABLE.read_text().splitlines():
        if line.startswith("## "):
            current = out.setdefault(line, {})
        elif current is not None and (m := ROW.match(line)):
            current[m.group(1)] = (m.group(2), m.group(3))
    return out


def section_for(module: str) -> dict[str, tuple[str, str | None]]:
    """The rows under "## `<module>` → ..." (a module's names) or "## `<class>` members → ..." (its members)."""
    return next(rows for heading, rows in sections().items() if heading.startswith(f"## `{module}` "))


@need_mark("lightning", "the table is checked against Lightning's own __all__s")
def test_every_covered_lightning_name_and_trainer_argument_is_in_the_table():
    from tests.compat.lightning_api_names import MODULES, defined_names, trainer_arguments

    for module in MODULES:
        missing = set(defined_names(module)) - set(section_for(module))
        assert not missing, f"{module}: add rows for {sorted(missing)} (python docs/make_lightning_api.py)"
    arguments = set(sections()["## `Trainer` arguments"])
    assert not set(trainer_arguments()) - arguments


@need_mark("lightning", "the table is checked against Lightning's own classes")
def test_every_member_of_lightnings_classes_is_in_the_table():
    from tests.compat.lightning_api_names import MEMBER_CLASSES, lightning_members

    for cls_name in MEMBER_CLASSES:
        missing = set(lightning_members(cls_name)) - set(section_for(cls_name))
        assert not missing, f"{cls_name}: add rows for {sorted(missing)} (python docs/make_lightning_api.py)"


def test_every_supported_member_exists_in_relay():
    from tests.compat.lightning_api_names import MEMBER_CLASSES, instance_names

    checked = 0
    for cls_name, relay_cls in MEMBER_CLASSES.items():
        present = instance_names("relay", cls_name)
        for name, (status, where) in section_for(cls_name).items():
            if status in ("supported", "difference"):
                assert name in present and where == f"trainer.{relay_cls}.{name}", (cls_name, name, where)
                checked += 1
            else:
                assert name not in present, f"{cls_name}.{name} is there: mark it supported"
    assert checked > 150


def test_every_supported_row_imports_from_relay_at_the_mirrored_path():
    checked = 0
    for heading, rows in sections().items():
        if " members " in heading:  # checked on instances: test_every_supported_member_exists_in_relay
            continue
        for name, (status, where) in rows.items():
            if status not in ("supported", "difference") or where is None:
                continue
            module, _, attr = where.rpartition(".")
            assert hasattr(importlib.import_module(module), attr), f"{heading}: {where} does not import"
            checked += 1
    assert checked > 80


def test_supported_trainer_arguments_are_accepted():
    import inspect

    from trainer import Trainer

    params = set(inspect.signature(Trainer.__init__).parameters)
    for name, (status, _) in sections()["## `Trainer` arguments"].items():
        if status in ("supported", "difference"):
            assert name in params, name


@pytest.mark.parametrize("status", ["refused", "planned"])
def test_rows_that_are_not_supported_say_why(status):
    for line in TABLE.read_text().splitlines():
        if f"| {status} |" in line:
            assert line.rstrip("| ").split("|")[-1].strip(), line


@need_mark("lightning", "the table is generated from Lightning")
def test_table_is_what_the_generator_writes_today():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(TABLE.with_name("make_lightning_api.py"))], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == TABLE.read_text(), "regenerate: python docs/make_lightning_api.py > docs/lightning_api.md"


def test_the_guide_counts_match_the_table():
    readme = (TABLE.parent / "guides" / "from-lightning.md").read_text()
    counts = {s: sum(1 for rows in sections().values() for status, _ in rows.values() if status == s)
              for s in ("supported", "difference", "refused", "planned")}
    said = re.search(r"Today: (\d+) rows supported, (\d+) accepted with a\s+documented difference, (\d+) refused "
                     r"with a reason(?:, (\d+) planned)?", readme)
    assert said, "docs/guides/from-lightning.md lost its counts"
    assert tuple(int(n or 0) for n in said.groups()) == tuple(counts.values()), \
        "update the counts in docs/guides/from-lightning.md"
