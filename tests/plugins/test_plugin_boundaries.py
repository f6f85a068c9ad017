"""Dependencies point one way: ``trainer`` imports ``plugins``, ``plugins`` never imports ``trainer``.

The first test reads the source (every import statement, including lazy ones inside functions), so it
holds for code paths no test runs. ``tests/trainer/test_imports.py`` checks that ``import trainer`` stays light
for hydra, tensorboard, dynamo and the ``plugins.strategies`` package itself; the second test here adds
what that one does not name: horovod and every module below ``plugins.strategies`` by prefix.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import plugins

PLUGINS_ROOT = Path(plugins.__file__).parent


def _imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):  # walks function bodies too: lazy imports count
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node):
            found.append((node.lineno, node.args[0].value))
    return found


def _is_dynamic_import(node: ast.Call) -> bool:
    """``importlib.import_module("trainer...")`` / ``__import__("trainer")`` with a literal name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return (name in ("import_module", "__import__") and bool(node.args)
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def test_no_plugin_module_imports_trainer():
    files = sorted(PLUGINS_ROOT.rglob("*.py"))
    assert len(files) > 20  # the walk found the package, not an empty directory
    offenders = []
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for lineno, module in _imported_names(tree):
            if module == "trainer" or module.startswith("trainer."):
                offenders.append(f"{path.relative_to(PLUGINS_ROOT.parent)}:{lineno} imports {module}")
    assert not offenders, "plugins/ must never import trainer:\n" + "\n".join(offenders)


def test_the_checker_sees_lazy_and_dynamic_imports():
    source = (
        "import os\n"
        "def f():\n    import trainer.module\n"
        "class C:\n    def g(self):\n        from trainer import Trainer\n"
        "importlib.import_module('trainer.loops')\n"
        "from . import sibling\n"
    )
    names = sorted(m for _, m in _imported_names(ast.parse(source)))
    assert names == ["os", "trainer", "trainer.loops", "trainer.module"]


def test_import_trainer_pulls_in_no_horovod_and_no_strategy_module():
    probe = (
        "import sys, torch; before = set(sys.modules);"
        "import trainer; from trainer import Trainer, Module, DataModule;"
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    added = out.stdout.split()
    forbidden = ("horovod", "plugins.strategies", "hydra", "tensorboard", "torch._dynamo")
    heavy = [m for m in added if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not heavy, heavy
    assert "trainer" in added  # the probe really imported it
