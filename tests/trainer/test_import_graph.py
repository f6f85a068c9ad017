"""Imports show the architecture: no circle among the module-level imports inside ``trainer/`` (type-only imports
under ``TYPE_CHECKING`` do not count; they run for type checkers only). Like tests/plugins/test_plugin_boundaries.py,
it reads the source, so it holds for code no test runs."""

from __future__ import annotations

import ast
from pathlib import Path

import trainer

ROOT = Path(trainer.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, known: set[str]) -> set[str]:
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
    return (with_parents & known) - {module_name(path)}


def import_graph() -> dict[str, set[str]]:
    files = [p for p in ROOT.rglob("*.py") if not {"configs", "templates"} & set(p.relative_to(ROOT).parts)]
    known = {module_name(p) for p in files}
    return {module_name(p): module_level_imports(p, known) for p in files}


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


def test_the_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
