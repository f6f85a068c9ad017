"""The trainer side's layout, checked from the source: the public objects at the top of ``trainer/`` and one package
per concern, and no module outside ``trainer/trainer.py`` reading a private Trainer member (the loops are handed
the per-call ``StageRun`` instead)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAINER = ROOT / "trainer"
# names that hold the Trainer in Relay's code (parameters, locals, the attribute callbacks and loops keep)
TRAINER_NAMES = {"trainer", "t", "tr"}
TOP_LEVEL = {"__init__.py", "__main__.py", "trainer.py", "trainer_properties.py", "module.py", "datamodule.py",
             "errors.py", "seed.py", "states.py"}


def _private_trainer_members() -> set[str]:
    """Every ``_name`` the Trainer class defines or assigns on ``self`` (trainer.py and its properties mixin)."""
    names: set[str] = set()
    for file in ("trainer.py", "trainer_properties.py"):
        for node in ast.walk(ast.parse((TRAINER / file).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_") \
                    and not node.name.startswith("__"):
                names.add(node.name)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                names.add(node.attr)
    return names


def _holds_trainer(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in TRAINER_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "trainer" and isinstance(node.value, ast.Name)


def private_reaches(source: str, private: set[str]) -> list[str]:
    """``trainer._x`` / ``self.trainer._x`` / ``getattr(trainer, "_x")`` for a private Trainer member ``_x``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private and _holds_trainer(node.value):
            found.append(f"line {node.lineno}: .{node.attr}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
                and len(node.args) >= 2 and _holds_trainer(node.args[0]) and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in private):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_no_module_outside_trainer_py_reads_a_private_trainer_member():
    private = _private_trainer_members() - {"_val_check_time_interval"}  # Lightning's own attribute name
    assert "_stage_flag" in private  # the scan sees the Trainer's private members
    offenders = []
    for path in sorted((ROOT / "trainer").rglob("*.py")) + sorted((ROOT / "plugins").rglob("*.py")):
        if path.parent == TRAINER and path.name in ("trainer.py", "trainer_properties.py"):
            continue
        offenders += [f"{path.relative_to(ROOT)} {hit}" for hit in private_reaches(path.read_text(), private)]
    assert not offenders, "read it from trainer.stage_run or a public member instead:\n" + "\n".join(offenders)


def test_the_check_finds_a_private_reach():
    source = "def f(trainer, self):\n    trainer._hooks.call()\n    self.trainer._results\n    getattr(trainer, '_x')\n"
    assert sorted(private_reaches(source, {"_hooks", "_results", "_x"})) == [
        "line 2: ._hooks", "line 3: ._results", "line 4: getattr(..., '_x')"]


def test_the_top_of_trainer_holds_the_public_objects_and_packages():
    loose = sorted(p.name for p in TRAINER.glob("*.py") if p.name not in TOP_LEVEL)
    assert not loose, f"a module at the top of trainer/ belongs in a package of its concern: {loose}"
    loops = sorted(p.name for p in (TRAINER / "loops").glob("*.py"))
    assert "run.py" not in loops and "state.py" not in loops and "model_setup.py" not in loops


def test_the_concepts_page_describes_the_folders_as_they_are():
    """docs/concepts.md's "Code layout" block: every package of ``trainer/`` is listed, nothing listed is missing,
    and the modules it names under ``stage/`` and ``loops/`` exist there."""
    import re

    text = (ROOT / "docs" / "concepts.md").read_text()
    block = text.split("## Code layout", 1)[1].split("```", 2)[1]
    trainer_part = block.split("\nplugins/", 1)[0]
    listed = set(re.findall(r"(?:^|\s)([a-z_]+)/", trainer_part)) - {"trainer"}
    packages = {p.name for p in TRAINER.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert listed == packages, f"listed but absent: {sorted(listed - packages)}; absent from the page: " \
                               f"{sorted(packages - listed)}"
    for package in ("stage", "loops"):
        lines = re.search(rf"^  {package}/.*?(?=^  [a-z_]+/)", trainer_part, re.M | re.S).group(0)
        named = set(re.findall(r"([a-z_]+\.py)", lines))
        assert named, package
        missing = [n for n in named if not (TRAINER / package / n).exists()]
        assert not missing, f"docs/concepts.md names {package}/{missing}, which do not exist"
