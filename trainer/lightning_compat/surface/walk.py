"""Lightning's surface, read from an installed Lightning: every module, the names each defines, the signatures.

Run by ``python docs/make_lightning_api.py --walk`` (it rewrites the data file next to this one) and by
``tests/compat/test_lightning_surface.py`` (which checks the data file is what the installed Lightning gives).
Needs Lightning itself; Relay never imports this module when it serves Lightning's names.

Which modules: every ``.py`` file under ``lightning/pytorch`` and ``lightning/fabric``, by its file, so a module
no ``__init__`` imports is found too; and the module paths Lightning's ``_graveyard`` (its shims for removed and
renamed names) puts in ``sys.modules`` (``lightning.fabric.accelerators.tpu``...), recorded as aliases.

Which names a module *defines* (the rule; private names included, dunder names excluded):

1. every name in the module's ``__all__``;
2. every name bound at top level of the file by ``def`` or ``class`` (under ``if``/``try`` too);
3. every name bound at top level by an assignment (constants, requirement flags, type aliases, ``TypeVar``s,
   loggers, registries);
4. every name bound by an import whose object is defined in a Lightning module (a re-export: served through
   the module that defines it), and every public name imported from ``lightning_utilities`` (Lightning's own
   utilities, which its modules re-export: ``rank_zero_info``, ``apply_to_collection``, ...);
5. every class Lightning's ``_graveyard`` sets on the module at import (``TPUAccelerator`` on
   ``lightning.fabric.accelerators``, ``PrecisionPlugin``...): a *legacy* name, served as the current class it
   subclasses (Lightning's adds a deprecation warning).

Names imported from torch or another third party (1 aside), and imported modules, are not the module's.

What is recorded per name: its kind, and what serving it needs (see ``entry`` below); for a public function or
class, and each public method a public class defines itself, ``inspect.signature`` as ``[name, kind, default]``
triples.
"""

from __future__ import annotations

import ast
import builtins
import enum
import importlib
import inspect
import json
import logging
import os
import sys
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

SKIP_PARTS: tuple[str, ...] = ()

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    class _ModuleSurface(TypedDict):
        """One module's entry in the surface file."""

        package: bool
        names: dict[str, Mapping[str, object]]
        all: NotRequired[list[str]]

GRAVEYARD = "._graveyard"
LIGHTNING_PREFIXES = ("lightning.pytorch", "lightning.fabric")


def module_names(lightning_dir: str) -> list[str]:
    """Dotted names of every module file under ``lightning/pytorch`` and ``lightning/fabric``."""
    out = []
    for sub in ("pytorch", "fabric"):
        for root, dirs, files in os.walk(os.path.join(lightning_dir, sub)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_PARTS and d != "__pycache__")
            rel = os.path.relpath(root, os.path.dirname(lightning_dir)).replace(os.sep, ".")
            for f in sorted(files):
                if f.endswith(".py"):
                    out.append(rel if f == "__init__.py" else f"{rel}.{f[:-3]}")
    return sorted(out)


def _top_level_bindings(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """``{name: [binding statements]}`` for the names bound at the top level of a file (``if``/``try`` included)."""
    found: dict[str, list[ast.AST]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for n in _target_names(target):
                        found.setdefault(n, []).append(node)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                found.setdefault(node.target.id, []).append(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    found.setdefault((alias.asname or alias.name).split(".")[0], []).append(node)
            elif isinstance(node, ast.If) and "__main__" not in ast.unparse(node.test):  # not a script's main block
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return found


def _target_names(target: ast.AST) -> list[str]:
    """Names an assignment target binds (``a``, ``a, b``; not ``a.x`` nor ``a[i]``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _target_names(t)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _origin(obj: object) -> str | None:
    """``module:qualname`` of a class or function (None for other objects)."""
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        return f"{obj.__module__}:{obj.__qualname__}"
    return None


def _is_lightning(module: str | None) -> bool:
    return bool(module) and (module.startswith(LIGHTNING_PREFIXES) or module == "lightning")


def _default(value: object) -> str:
    if value is inspect.Parameter.empty:
        return "<required>"
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (type, types.FunctionType)):
        return f"<{value.__qualname__}>"  # by name: Relay serves its own object under Lightning's name
    text = repr(value)
    return f"<{type(value).__name__}>" if " at 0x" in text else text


def signature(obj: Any) -> list[list[str]] | None:
    """``[[name, kind, default], ...]`` of ``inspect.signature(obj)``, or None when it has none."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, _default(p.default)] for p in sig.parameters.values()]


def method_signature(cls: type, name: str) -> list[list[str]] | None:
    """The signature of ``cls.name`` as called on an instance (without ``self``, or a classmethod's ``cls``)."""
    sig = signature(getattr(cls, name))
    if sig and sig[0][0] in ("self", "cls") and sig[0][1] == "POSITIONAL_OR_KEYWORD":
        sig = sig[1:]
    return sig


def _methods(cls: type) -> dict[str, list[list[str]] | None]:
    """Signatures of the public methods ``cls`` defines itself (properties and attributes are not callables)."""
    out = {}
    for name, raw in vars(cls).items():
        if name.startswith("_") or not isinstance(raw, (staticmethod, classmethod, types.FunctionType)):
            continue
        out[name] = method_signature(cls, name)
    return dict(sorted(out.items()))


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    try:
        json.dumps(value)
    except TypeError:
        return False, None
    return True, value


def _expression(module: types.ModuleType, stmt: ast.AST,
                bindings: dict[str, list[ast.AST]]) -> dict[str, str | dict[str, str]] | None:
    """``{"expr": text, "uses": {name: where}}`` for a one-off assignment whose names can all be found again
    without Lightning: where the module imported them from (``module:name``, or a module), the module's own names
    (``lightning.x:name``) and builtins. None for anything else (lambdas, comprehensions, other names)."""
    value = getattr(stmt, "value", None)
    if value is None or not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return None
    if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    uses: dict[str, str] = {}
    for node in ast.walk(value):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return None
        if not isinstance(node, ast.Name) or node.id == "__name__":
            continue
        where = _where(module, node.id, bindings.get(node.id, []))
        if where is None:
            if node.id in vars(builtins):
                continue
            return None
        uses[node.id] = where
    return {"expr": ast.unparse(value), "uses": dict(sorted(uses.items()))}


def _where(module: types.ModuleType, name: str, stmts: list[ast.AST]) -> str | None:
    """Where ``name``, as the module binds it, can be found again: ``module:name`` or a module's name."""
    if not stmts:
        return None
    if not all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in stmts):
        return f"{module.__name__}:{name}" if len(stmts) == 1 else None
    stmt = stmts[0]
    if isinstance(stmt, ast.Import):
        alias = next(a for a in stmt.names if (a.asname or a.name.split(".")[0]) == name)
        return alias.name if alias.asname else alias.name.split(".")[0]
    return f"{_resolve_from(module, stmt)}:{_imported_name(stmt, name)}"


def _imported_entry(module: types.ModuleType, name: str, obj: object, stmts: list[ast.AST],
                    in_all: bool) -> Mapping[str, object] | None:
    """A name the module binds by importing it: a Lightning object re-exported, a listed or lightning_utilities name
    served from where it comes, else not the module's."""
    obj_module = getattr(obj, "__module__", None)
    origin = _origin(obj) or (f"{obj_module}:{name}" if obj_module else None)
    lightning_source = next((s for s in stmts if isinstance(s, ast.ImportFrom) and name != "*"
                             and _is_lightning(_resolve_from(module, s))), None)
    if (_is_lightning(obj_module) and origin) or lightning_source is not None:
        # a type alias, TypeVar or constant imported from another Lightning module is re-exported too: its object's
        # __module__ is typing's or none (``from lightning.fabric.connector import _PRECISION_INPUT``)
        source = lightning_source or next(s for s in stmts if isinstance(s, ast.ImportFrom))
        return {"kind": "reexport", "from": f"{_resolve_from(module, source)}:{_imported_name(source, name)}"}
    from_utilities = any(isinstance(s, ast.ImportFrom) and (s.module or "").startswith("lightning_utilities")
                         for s in stmts)
    if in_all or (from_utilities and not name.startswith("_")):
        source = next((s for s in stmts if isinstance(s, ast.ImportFrom)), None)
        if source is None:
            return None
        return {"kind": "external", "from": f"{_resolve_from(module, source)}:{_imported_name(source, name)}"}
    return None


def _class_entry(module: types.ModuleType, name: str, obj: type) -> dict[str, object]:
    """A class the module defines (or one of Lightning's it re-exports by assignment), with its public surface."""
    if GRAVEYARD in module.__name__ and _legacy_base(obj) is not None:
        return {"kind": "legacy", "base": _legacy_base(obj)}
    if obj.__module__ != module.__name__ and _is_lightning(obj.__module__):
        return {"kind": "reexport", "from": _origin(obj)}
    out: dict[str, object] = {"kind": "class"}
    if not name.startswith("_"):
        out["signature"] = signature(obj)
        out["methods"] = _methods(obj)
    if isinstance(obj, enum.EnumMeta):
        out["kind"] = "enum"
    if issubclass(obj, BaseException):
        out["kind"] = "exception"
    return out


def entry(module: types.ModuleType, name: str, stmts: list[ast.AST], in_all: bool,
          bindings: dict[str, list[ast.AST]]) -> Mapping[str, object] | None:
    """What serving ``module.name`` needs, or None when the name is not the module's (the rule above)."""
    obj = getattr(module, name, None)
    if isinstance(obj, types.ModuleType):
        return None
    if {type(s) for s in stmts} <= {ast.Import, ast.ImportFrom}:
        return _imported_entry(module, name, obj, stmts, in_all)
    if isinstance(obj, type):
        return _class_entry(module, name, obj)
    if isinstance(inspect.unwrap(obj) if callable(obj) else obj, types.FunctionType) and any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for s in stmts):
        out = {"kind": "function"}
        if not name.startswith("_"):
            out["signature"] = signature(obj)
        return out
    if len(stmts) == 1 and isinstance(stmts[0], (ast.Assign, ast.AnnAssign)) and stmts[0].value is not None:
        ok, value = _literal(stmts[0].value)
        if ok:
            return {"kind": "constant", "value": value}
        expr = _expression(module, stmts[0], bindings)
        if expr is not None:
            return {"kind": "expression", **expr}
    if name not in vars(module):
        return None  # bound in a branch not taken here
    if isinstance(obj, types.FunctionType) and _is_lightning(obj.__module__):
        return {"kind": "function"}
    if isinstance(obj, logging.Logger):
        return {"kind": "logger", "logger": obj.name}
    ok, _ = _literal(ast.Constant(obj)) if isinstance(obj, (bool, int, float, str, type(None))) else (False, None)
    if ok:
        return {"kind": "constant", "value": obj, "note": "value on the machine that made this file"}
    return {"kind": "object", "type": f"{type(obj).__module__}:{type(obj).__qualname__}"}


def _legacy_base(cls: type) -> str | None:
    """The current Lightning class a legacy (graveyard) class stands for: its first base outside the graveyard."""
    for base in cls.__mro__[1:]:
        if _is_lightning(base.__module__) and GRAVEYARD not in base.__module__:
            return _origin(base)
    return None


def _injected(module: types.ModuleType, names: Mapping[str, object]) -> Mapping[str, Mapping[str, object]]:
    """Classes the graveyard set on ``module`` at import (rule 5)."""
    out = {}
    for attr, obj in vars(module).items():
        if attr in names or attr.startswith("__") or not isinstance(obj, type) or GRAVEYARD not in obj.__module__:
            continue
        if _legacy_base(obj) is not None:
            out[attr] = {"kind": "legacy", "base": _legacy_base(obj)}
        elif getattr(sys.modules[obj.__module__], obj.__qualname__, None) is obj:
            out[attr] = {"kind": "reexport", "from": _origin(obj)}
    return out


def _resolve_from(module: types.ModuleType, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _imported_name(node: ast.ImportFrom, bound: str) -> str:
    return next(a.name for a in node.names if (a.asname or a.name) == bound)


def walk_module(name: str) -> _ModuleSurface:
    module = importlib.import_module(name)
    path = module.__file__ or ""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    bindings = _top_level_bindings(tree)
    declared = list(getattr(module, "__all__", []) or [])
    names: dict[str, Mapping[str, object]] = {}
    for bound in sorted(set(bindings) | set(declared)):
        if bound.startswith("__") and bound.endswith("__"):
            continue
        found = entry(module, bound, bindings.get(bound, []), bound in declared, bindings)
        if found is not None:
            names[bound] = found
    out: _ModuleSurface = {"package": hasattr(module, "__path__"), "names": names}
    if declared:
        out["all"] = declared
    return out


def walk() -> dict[str, object]:
    """The whole surface of the installed Lightning."""
    import lightning

    lightning_dir = os.path.dirname(lightning.__file__)
    modules = {name: walk_module(name) for name in module_names(lightning_dir)}
    for name, spec in modules.items():
        spec["names"] = dict(sorted({**spec["names"], **_injected(sys.modules[name], spec["names"])}.items()))
    aliases = {key: module.__name__ for key, module in sorted(sys.modules.items())
               if key.startswith(LIGHTNING_PREFIXES) and isinstance(module, types.ModuleType) and module.__name__ != key}
    return {"lightning": lightning.__version__, "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "modules": modules, "module_aliases": aliases}


def dumps(surface: Mapping[str, object]) -> str:
    """The data file's text: one entry per line where it matters, so a new release reads as a diff."""
    return json.dumps(surface, indent=1, sort_keys=True) + "\n"
