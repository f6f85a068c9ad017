"""Imports show the architecture: no circle among the module-level imports inside ``trainer/`` or ``plugins/``
(type-only imports under ``TYPE_CHECKING`` do not count; they run for type checkers only), and function-local
imports of Relay's own modules do not grow back. Like tests/plugins/test_plugin_boundaries.py, it reads
the source, so it holds for code no test runs."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import plugins
import trainer

ROOT = Path(trainer.__file__).parent
CODE_SHAPE = Path(__file__).resolve().parents[2] / "benchmarks" / "code_shape.py"
# Function-local imports of trainer.*/plugins.* without a ``# local import: why`` comment (benchmarks/code_shape.py
# (c)): none. Never raise it: import at module level, or say in the comment why the import must stay local.
LOCAL_IMPORT_CEILING = 0


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """The Relay modules imported at module level (a ``try`` body too), and their parent packages."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for n in node.body if isinstance(node, ast.Try) else [node]:
            if isinstance(n, ast.Import):
                found |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                found |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
    with_parents = set()
    for name in found & known:
        parts = name.split(".")
        with_parents |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return (with_parents & known) - {module_name(path, root)}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = [p for p in root.rglob("*.py") if not {"configs", "templates"} & set(p.relative_to(root).parts)]
    known = {module_name(p, root) for p in files}
    return {module_name(p, root): module_level_imports(p, known, root) for p in files}


def without_own_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Drop each module's edges to its own parent packages: Python imports those before the module runs, so a package
    ``__init__`` that imports its submodules (``plugins.accelerators`` does) is not a circle with them."""
    return {m: {t for t in targets if not m.startswith(t + ".")} for m, targets in graph.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_circle_among_module_level_imports_in_trainer():
    assert circles(import_graph()) == []


def test_no_circle_among_module_level_imports_in_plugins():
    graph = import_graph(Path(plugins.__file__).parent)
    assert len(graph) > 20 and circles(without_own_packages(graph)) == []


def _code_shape():
    spec = importlib.util.spec_from_file_location("code_shape", CODE_SHAPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# ``Any`` in trainer/'s annotations per 1,000 lines (benchmarks/code_shape.py (e)): 29.6 on 2026-11-29, 61.2 before the
# types were written out. Never raise it: give the value its type (``object`` when it is only passed on).
ANY_PER_1000_CEILING = 30.0


def test_any_in_annotations_does_not_grow_back():
    code_shape = _code_shape()
    found, lines = code_shape.any_in_annotations(code_shape.ROOT, "trainer")
    assert found > 0 and lines > 10_000  # it reads the tree
    assert 1000 * found / lines <= ANY_PER_1000_CEILING, (
        f"{found} `Any` in trainer/'s annotations, {1000 * found / lines:.1f} per 1,000 lines (ceiling "
        f"{ANY_PER_1000_CEILING}): annotate the new code with the types it handles")


def test_function_local_imports_do_not_grow_back():
    found = _code_shape().local_import_list()
    bare = [f"{f.where} {f.statement}" for f in found if not f.reason]
    assert len(found) > len(bare)  # the count sees the reasoned ones too, so it reads the tree
    assert len(bare) <= LOCAL_IMPORT_CEILING, (
        f"{len(bare)} function-local imports of trainer.*/plugins.* without a reason (ceiling "
        f"{LOCAL_IMPORT_CEILING}): import at module level, or add a `# local import: why` comment:\n" + "\n".join(bare))


def test_the_local_import_count_reads_reasons(tmp_path: Path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "x.py").write_text(
        "import os\n\n"
        "def f():\n    # local import: a reason\n    # that goes on\n    from trainer import a\n"
        "    from trainer.b import c\n    import json\n\n"
        "def g():\n    from plugins import d\n    from trainer.e import f  # local import: on the line\n"
    )
    found = {f.statement: f.reason for f in _code_shape().local_import_list(("trainer",), tmp_path)}
    reason = "a reason that goes on"
    assert found == {"from trainer import a": reason, "from trainer.b import c": reason, "from plugins import d": None,
                     "from trainer.e import f": "on the line"}


def test_the_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    package_init = {"p": {"p.a"}, "p.a": {"p", "p.b"}, "p.b": {"p.a"}}  # p/__init__ imports p.a; p.a <-> p.b
    assert circles(without_own_packages(package_init)) == [["p.a", "p.b"]]
