"""The shape of the trainer code, measured statically: how often following the Trainer leaves a file
and comes back, the longest functions, function-local imports of Relay's own modules, ``Trainer.__init__``'s length.

    python benchmarks/code_shape.py            # the figures
    python benchmarks/code_shape.py --trace    # also the walk itself, one line per function entered
    python benchmarks/code_shape.py --imports  # also every function-local import of Relay's modules, with its reason

(a) The route: from the stage entry (``trainer/stage/run.py:run_stage``), depth-first, in the order written, every
call the Trainer is passed to: the Trainer itself, the per-call ``StageRun`` that holds it, or anything read from
either (``trainer.strategy``, ``run.plan``, ``trainer.checkpoint_callbacks``...), into ``trainer/`` and ``plugins/``
(``RouteWalker`` says exactly what is followed). A function is entered once. The headline count records the files
of the functions entered, in order, as a reader jumping to each function meets them: a *return* is entering a
function in a file the walk had left (a caller continuing after a call is not one). It is given for the trainer side
(the walk stopping at ``plugins/``) and with ``plugins/``; it reproduces the count first reported for the tree
before the redesign (36 against 38). A stricter count records the caller's file again after each call; a *stay* is
a run of that trace in one file, and *returns* = stays - files. The narrowest walk, which the project counted first,
follows only calls with the Trainer itself (or an object that holds it) among the arguments, into ``trainer/``.

(b) The ten longest functions (``def`` line to last line) in ``trainer/`` and ``plugins/``.
(c) ``import``/``from ... import`` statements inside function bodies that import ``trainer.*`` or ``plugins.*``
(relative imports too), and the number of files with at least one; those kept on purpose carry a
``# local import: why`` comment (on the line, or above it among the function's imports) and are counted apart.
Third-party imports (optional engines such as wandb or deepspeed) are not counted: they stay lazy by design.
(d) ``Trainer.__init__``'s length in lines.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("trainer", "plugins")
TRAINER_NAMES = {"trainer", "t"}  # parameter names that carry the Trainer in Relay's code
TRAINER_CLASSES = ("Trainer", "TrainerProperties")


@dataclass
class Func:
    module: str
    qualname: str
    node: ast.FunctionDef
    cls: str | None = None
    file: str = ""  # the path from the tree's root


@dataclass
class ModuleInfo:
    name: str
    tree: ast.Module
    funcs: dict[str, Func] = field(default_factory=dict)  # qualname -> Func
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module:name" or "module"
    holders: set[str] = field(default_factory=set)  # classes storing ``self.trainer``
    attrs: dict[tuple[str, str], str] = field(default_factory=dict)  # (class, attribute) -> class name it holds


def load_modules(package: str = "trainer", root: Path = ROOT) -> dict[str, ModuleInfo]:
    """Every module under ``root/package`` (``package`` may be a path: ``lightning/pytorch``)."""
    modules: dict[str, ModuleInfo] = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        file = str(path.relative_to(root))
        info = ModuleInfo(name, ast.parse(path.read_text(), str(path)))
        for node in ast.walk(info.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    info.imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        for node in info.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info.funcs[node.name] = Func(name, node.name, node, None, file)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        info.funcs[f"{node.name}.{item.name}"] = Func(name, f"{node.name}.{item.name}", item, node.name,
                                                                      file)
                for n in ast.walk(node):  # self.fit_loop = FitLoop(...): what the attribute holds
                    call = n.value if isinstance(n, ast.Assign) else None
                    held = _class_called(call) if isinstance(call, ast.Call) else None
                    if held is not None:
                        for t in n.targets:
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                                info.attrs[(node.name, t.attr)] = held
                if any(isinstance(n, ast.Attribute) and n.attr == "trainer" and isinstance(n.value, ast.Name)
                       and n.value.id == "self" and isinstance(n.ctx, ast.Store) for n in ast.walk(node)):
                    info.holders.add(node.name)
        modules[name] = info
    _inherit_holders(modules)
    return modules


def _class_called(call: ast.Call) -> str | None:
    """The class a constructor call names: ``FitLoop(...)``, ``_FitLoop(...)``, ``loops._FitLoop(...)``."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name if name.lstrip("_")[:1].isupper() else None


def _inherit_holders(modules: dict[str, ModuleInfo]) -> None:
    """A class whose base class (in the same packages) stores ``self.trainer`` holds the Trainer too."""
    holders = {cls for info in modules.values() for cls in info.holders}
    changed = True
    while changed:
        changed = False
        for info in modules.values():
            for node in info.tree.body:
                if (isinstance(node, ast.ClassDef) and node.name not in info.holders
                        and any(_base_name(b) in holders for b in node.bases)):
                    info.holders.add(node.name)
                    holders.add(node.name)
                    changed = True


def _base_name(base: ast.expr) -> str | None:
    """A base class's name: ``Loop`` or ``loops.Loop``."""
    return base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None


class Walker:
    def __init__(self, modules: dict[str, ModuleInfo]) -> None:
        self.modules = modules
        self.seen: set[tuple[str, str]] = set()
        self.trace: list[str] = []
        self.visits: list[Func] = []
        self.trainer_methods = {q.split(".", 1)[1]: f for m in modules.values() for q, f in m.funcs.items()
                                if f.cls in TRAINER_CLASSES}
        self.holder_methods: dict[str, list[Func]] = {}
        for m in modules.values():
            for q, f in m.funcs.items():
                if f.cls in m.holders:
                    self.holder_methods.setdefault(q.split(".", 1)[1], []).append(f)

    def resolve_name(self, module: ModuleInfo, name: str) -> Func | None:
        if name in module.funcs:
            return module.funcs[name]
        target = module.imports.get(name)
        if target is None:
            return None
        mod, _, attr = target.partition(":")
        info = self.modules.get(mod)
        if info is None:
            return None
        if attr in info.funcs:
            return info.funcs[attr]
        return self.resolve_name(info, attr) if attr in info.imports else None

    def carriers(self, func: Func) -> set[str]:
        """Names that hold the Trainer (or an object holding it) inside ``func``."""
        names = {a.arg for a in func.node.args.args + func.node.args.kwonlyargs if a.arg in TRAINER_NAMES}
        holder = func.cls is not None and (func.cls in TRAINER_CLASSES or func.cls in self.modules[func.module].holders)
        if holder:
            names.add("self")
        for node in ast.walk(func.node):  # t = trainer, trainer = self.trainer: other names for it
            if isinstance(node, ast.Assign) and _is_trainer(node.value, names):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return names

    def callees(self, func: Func) -> list[Func]:
        module = self.modules[func.module]
        carriers = self.carriers(func)
        out: list[Func] = []
        calls = [n for n in ast.walk(func.node) if isinstance(n, ast.Call)]
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            target = self._resolve_call(module, func, call, carriers)
            if target is not None:
                out.append(target)
        return out

    def _resolve_call(self, module: ModuleInfo, func: Func, call: ast.Call, carriers: set[str]) -> Func | None:
        f = call.func
        passes = any(_mentions(a, carriers) for a in [*call.args, *(k.value for k in call.keywords)])
        if isinstance(f, ast.Name):
            target = self.resolve_name(module, f.id)
            return target if target is not None and passes else None
        if not isinstance(f, ast.Attribute):
            return None
        base = f.value
        if isinstance(base, ast.Name) and base.id in carriers:
            if base.id == "self" and func.cls is not None:
                own = module.funcs.get(f"{func.cls}.{f.attr}")
                if own is not None:
                    return own
            if base.id != "self" or func.cls in TRAINER_CLASSES:
                return self.trainer_methods.get(f.attr)
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in carriers:
            owner = func.cls if base.value.id == "self" else "Trainer"  # e.g. trainer.fit_loop.run(...)
            return self.attribute_method(owner, base.attr, f.attr)
        return None

    def attribute_method(self, owner: str, attr: str, method: str) -> Func | None:
        """``owner().attr.method``, where ``owner`` assigns ``self.attr = SomeClass(...)`` in trainer/."""
        for info in self.modules.values():
            held = info.attrs.get((owner, attr))
            if held is None:
                continue
            mod, _, cls = info.imports.get(held, f"{info.name}:{held}").partition(":")
            target, followed = self.modules.get(mod), {mod}
            while target is not None and cls not in target.holders and cls in target.imports:  # a package's re-export
                mod, _, cls = target.imports[cls].partition(":")
                target = None if mod in followed else self.modules.get(mod)
                followed.add(mod)
            if target is None or cls not in target.holders:  # ``loops.FitLoop(...)``: the holder of that name
                target = next((m for m in self.modules.values() if cls in m.holders), None)
            if target is not None:
                return target.funcs.get(f"{cls}.{method}")
        return None

    def walk(self, func: Func) -> None:
        key = (func.module, func.qualname)
        self.seen.add(key)
        self.visits.append(func)
        self.trace.append(func.file)
        for callee in self.callees(func):
            if (callee.module, callee.qualname) in self.seen:
                continue
            self.walk(callee)
            self.trace.append(func.file)


def _is_trainer(node: ast.AST, names: set[str]) -> bool:
    """``trainer`` itself, or ``x.trainer`` of an object that holds it."""
    if isinstance(node, ast.Name):
        return node.id in names and node.id != "self"
    return isinstance(node, ast.Attribute) and node.attr == "trainer" and isinstance(node.value, ast.Name)


def _mentions(node: ast.AST, names: set[str]) -> bool:
    """An argument that is the Trainer (or the holder ``self``), or ``self.trainer``."""
    return (isinstance(node, ast.Name) and node.id in names) or _is_trainer(node, names)


class RouteWalker(Walker):
    """The route: from the stage entry, every call the Trainer is passed to (itself, the per-call
    ``StageRun`` that holds it, or anything read from either: ``trainer.strategy``, ``run.plan``...), in all
    branches, in the order written, into ``trainer/`` and ``plugins/``.

    Inside a function, the names that carry the Trainer are its parameters that received it, ``self`` of a class
    that holds it, and every local assigned from an expression that mentions a carrier. A call is followed when an
    argument mentions a carrier (the callee's matching parameters then carry it), or when it is a method of a
    carrier whose class is known (a ``self`` method, a ``Trainer``/``StageRun`` method, a parameter annotated with a
    class of ``trainer/`` or ``plugins/``, an attribute a class assigns from a constructor). Constructors are
    followed into ``__init__``. A function is entered once."""

    CARRIER_CLASSES = ("Trainer", "TrainerProperties", "StageRun")

    def __init__(self, modules: dict[str, ModuleInfo]) -> None:
        super().__init__(modules)
        self.passes_on: set[str] = set()  # files with a function on the route that calls into another file
        self.classes: dict[str, tuple[ModuleInfo, str]] = {}
        for m in modules.values():
            for node in m.tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, (m, node.name))

    def method_of(self, cls: str | None, name: str) -> Func | None:
        if cls is None:
            return None
        if cls in ("Trainer", "TrainerProperties"):
            return self.trainer_methods.get(name)
        found = self.classes.get(cls)
        return found[0].funcs.get(f"{found[1]}.{name}") if found else None

    def route_walk(self, func: Func, carried: set[str]) -> None:
        key = (func.module, func.qualname)
        if key in self.seen:
            return
        self.seen.add(key)
        self.visits.append(func)
        self.trace.append(func.file)
        module = self.modules[func.module]
        types = self.annotations(func)
        carriers = set(carried)
        if func.cls is not None and (func.cls in self.CARRIER_CLASSES or func.cls in module.holders):
            carriers.add("self")
            types["self"] = func.cls
        aliases: dict[str, tuple[str, str]] = {}  # loop = trainer.fit_loop: the local names the held object
        for node in ast.walk(func.node):  # locals assigned from a carrier-mentioning expression carry it too
            if isinstance(node, ast.Assign) and _mentions_any(node.value, carriers):
                for t in node.targets:
                    carriers.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
                value, target = node.value, node.targets[0]
                if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and isinstance(target, ast.Name)
                        and len(node.targets) == 1):
                    base = value.value.id
                    owner = types.get(base, func.cls if base == "self" else None)
                    if owner is not None:
                        aliases[target.id] = (owner, value.attr)
        calls = sorted((n for n in ast.walk(func.node) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            self._aliases = aliases  # this function's (a callee walked before set its own)
            target, passed = self.route_target(module, func, call, carriers, types)
            if target is not None and target.file != func.file:
                self.passes_on.add(func.file)
            if target is not None and (target.module, target.qualname) not in self.seen:
                self.route_walk(target, passed)
                self.trace.append(func.file)

    def annotations(self, func: Func) -> dict[str, str]:
        out = {}
        for a in func.node.args.args + func.node.args.kwonlyargs:
            ann = a.annotation
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                ann = ast.parse(ann.value, mode="eval").body
            if isinstance(ann, ast.Name) and ann.id in self.classes:
                out[a.arg] = ann.id
            elif isinstance(ann, ast.Name) and ann.id in ("Trainer",):
                out[a.arg] = ann.id
        for name in ("trainer", "t"):
            out.setdefault(name, "Trainer")
        out.setdefault("run", "StageRun")
        return out

    def route_target(self, module: ModuleInfo, func: Func, call: ast.Call, carriers: set[str],
                     types: dict[str, str]) -> tuple[Func | None, set[str]]:
        f = call.func
        args = list(call.args)
        mentioned = [i for i, a in enumerate(args) if _mentions_any(a, carriers)]
        kw = {k.arg for k in call.keywords if k.arg and _mentions_any(k.value, carriers)}
        target = None
        if isinstance(f, ast.Name):
            target = self.resolve_name(module, f.id)
            if target is None and f.id in self.classes:  # a constructor
                found = self.classes[f.id]
                target = found[0].funcs.get(f"{found[1]}.__init__")
            if target is None or not (mentioned or kw):
                return None, set()
        elif isinstance(f, ast.Attribute):
            base = f.value
            alias = getattr(self, "_aliases", {}).get(base.id) if isinstance(base, ast.Name) else None
            if alias is not None:  # ``loop.run(...)`` where ``loop = trainer.fit_loop``
                target = self.attribute_method(alias[0], alias[1], f.attr)
                if target is not None:
                    kw.add("self")
            elif isinstance(base, ast.Name) and base.id in carriers:
                if base.id == "self" and func.cls is not None:
                    target = module.funcs.get(f"{func.cls}.{f.attr}") or self.method_of(types.get("self"), f.attr)
                else:
                    target = self.method_of(types.get(base.id), f.attr)
                if target is not None:
                    kw.add("self")
            elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in carriers:
                owner = types.get(base.value.id, func.cls if base.value.id == "self" else None)
                if owner in ("Trainer", "TrainerProperties") and base.attr == "stage_run":
                    target = self.method_of("StageRun", f.attr)
                elif owner is not None:
                    target = self.attribute_method(owner, base.attr, f.attr)
                if target is not None:
                    kw.add("self")
            elif isinstance(base, ast.Name) and (mentioned or kw):  # module.function(carrier)
                imported = module.imports.get(base.id) or (base.id if base.id in self.modules else None)
                info = self.modules.get(imported.partition(":")[0]) if imported and ":" not in imported else None
                if imported and ":" in imported:  # ``from pkg import mod as name``
                    mod, _, attr = imported.partition(":")
                    info = self.modules.get(f"{mod}.{attr}")
                target = info.funcs.get(f.attr) if info is not None else None
        if target is None:
            return None, set()
        params = [a.arg for a in target.node.args.args]
        offset = 1 if target.cls is not None and params[:1] == ["self"] else 0
        passed = {params[i + offset] for i in mentioned if i + offset < len(params)} | (kw & set(params))
        if "self" in kw:
            passed.add("self")
        return target, passed


def _mentions_any(node: ast.AST, names: set[str]) -> bool:
    """An expression that reads a carrier: the name itself, or an attribute, subscript or call rooted at it."""
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def follow_trainer(show: bool, plugins: bool = True) -> dict[str, object]:
    """The route; ``plugins=False`` stops at ``plugins/`` (the trainer side alone)."""
    modules = {**load_modules(), **(load_modules("plugins") if plugins else {})}
    walker = RouteWalker(modules)
    walker.route_walk(modules["trainer.stage.run"].funcs["run_stage"], {"trainer"})
    return _route_figures(walker, show)


def _lightning_root() -> Path | None:
    """The folder holding the installed ``lightning`` package (read as text, never imported)."""
    import importlib.util

    spec = importlib.util.find_spec("lightning")
    return Path(spec.origin).resolve().parent.parent if spec is not None and spec.origin else None


def follow_lightning(show: bool, fabric: bool = False) -> dict[str, object] | None:
    """The same walk over the installed Lightning, from ``Trainer._run`` (what every Trainer call runs once its inputs
    are attached, as ``run_stage`` is for Relay), in ``lightning/pytorch`` (and ``lightning/fabric``, as ``plugins/``)."""
    root = _lightning_root()
    if root is None:
        return None
    modules = load_modules("lightning/pytorch", root)
    if fabric:
        modules.update(load_modules("lightning/fabric", root))
    walker = RouteWalker(modules)
    walker.route_walk(modules["lightning.pytorch.trainer.trainer"].funcs["Trainer._run"], {"self"})
    return _route_figures(walker, show)


def follow_trainer_narrow(show: bool) -> dict[str, object]:
    """The narrower walk the project counted before: calls with the Trainer itself among the arguments."""
    modules = load_modules()
    walker = Walker(modules)
    walker.walk(modules["trainer.stage.run"].funcs["run_stage"])
    return _route_figures(walker, show)


def _route_figures(walker: Walker, show: bool) -> dict[str, object]:
    stays: list[str] = []
    for file in walker.trace:
        if not stays or stays[-1] != file:
            stays.append(file)
    entries = Counter(stays)
    if show:
        for f in walker.visits:
            print(f"  visit {f.file}:{f.qualname}")
        print("  stays: " + " -> ".join(stays))
    files = [f.file for f in walker.visits]  # the files of the functions entered, in order
    passes_on = getattr(walker, "passes_on", None)
    leaves = {f for f in files if passes_on is not None and f not in passes_on}
    return {"visits": len(walker.visits), "stays": len(stays), "files": len(entries),
            "returns": len(stays) - len(entries), "entry_returns": _entry_returns(files),
            "leaf_files": len(leaves), "between_passing_files": _entry_returns([f for f in files if f not in leaves]),
            "by_package": _entry_returns([f.rsplit("/", 1)[0] for f in files]),
            "re-entered": {f: n - 1 for f, n in entries.most_common() if n > 1}}


def _entry_returns(files: list[str]) -> int:
    """Entering a function in a file the walk had left (a caller continuing after a call is not recorded)."""
    entered: list[str] = []
    for file in files:
        if not entered or entered[-1] != file:
            entered.append(file)
    return len(entered) - len(set(entered))


def functions(packages: tuple[str, ...] = PACKAGES) -> list[tuple[int, str]]:
    out = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                    out.append((node.end_lineno - node.lineno + 1, where))
    return sorted(out, reverse=True)


KEPT_MARK = "local import:"  # the comment that gives a function-local import its reason


@dataclass(frozen=True)
class LocalImport:
    where: str  # path:line
    statement: str
    reason: str | None  # the ``# local import: ...`` comment above it (or on its line), if any


def _reason(lines: list[str], node: ast.stmt) -> str | None:
    """The ``# local import: why`` comment on the import's line, or above it in its block of imports/comments."""
    own = lines[node.lineno - 1]
    if KEPT_MARK in own.partition("#")[2]:
        return own.partition(KEPT_MARK)[2].strip()
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith(("#", "from ", "import ")):
        if lines[i].strip().startswith("#") and KEPT_MARK in lines[i]:
            text = [lines[i].partition(KEPT_MARK)[2].strip()]
            while lines[i + 1].strip().startswith("#"):  # the comment goes on
                i += 1
                text.append(lines[i].strip().lstrip("#").strip())
            return " ".join(text)
        i -= 1
    return None


def local_import_list(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> list[LocalImport]:
    """Every ``import``/``from ... import`` of ``trainer.*``/``plugins.*`` (relative ones too) inside a function."""
    out: dict[str, LocalImport] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text()
            lines = text.splitlines()
            tree = ast.parse(text)
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    own = (isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0]
                                                                 in PACKAGES)) or (
                        isinstance(node, ast.Import) and any(a.name.split(".")[0] in PACKAGES for a in node.names))
                    if own:
                        where = f"{path.relative_to(root)}:{node.lineno}"
                        out[where] = LocalImport(where, ast.unparse(node), _reason(lines, node))
    return list(out.values())


def local_imports(packages: tuple[str, ...] = PACKAGES) -> tuple[int, int]:
    found = local_import_list(packages)
    return len(found), len({f.where.split(":")[0] for f in found})


def any_in_annotations(root: Path, package: str) -> tuple[int, int]:
    """``Any`` in the annotations (parameters, returns, annotated assignments) under ``root/package``, and the lines."""
    found = lines = 0
    for path in sorted((root / package).rglob("*.py")):
        text = path.read_text()
        lines += len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            annotations: list[ast.expr | None] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                annotations += [arg.annotation for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                                if arg is not None]
                annotations.append(node.returns)
            elif isinstance(node, ast.AnnAssign):
                annotations.append(node.annotation)
            for ann in annotations:
                if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # a string annotation
                    ann = ast.parse(ann.value, mode="eval").body
                found += sum(1 for n in ast.walk(ann) if (isinstance(n, ast.Name) and n.id == "Any")
                             or (isinstance(n, ast.Attribute) and n.attr == "Any")) if ann is not None else 0
    return found, lines


def trainer_init_lines() -> int:
    tree = ast.parse((ROOT / "trainer" / "trainer.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Trainer":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return item.end_lineno - item.lineno + 1
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="store_true", help="list the functions the walk enters")
    parser.add_argument("--imports", action="store_true", help="list the function-local imports (reason first)")
    args = parser.parse_args()
    walk = follow_trainer(args.trace)
    trainer_side = follow_trainer(False, plugins=False)
    print(f"(a) the route: following the Trainer from run_stage through every call it is passed to, the files of the "
          f"functions entered in order: {trainer_side['entry_returns']} returns to a file already left on the trainer "
          f"side ({walk['entry_returns']} entering plugins/ too; goal <= 12)")
    print(f"    of those, leaving out the {trainer_side['leaf_files']} files on the route that call no other file (a reader "
          f"looks in and comes back: rank_zero.py, errors.py, overrides.py...): {trainer_side['between_passing_files']} "
          f"returns between the files that pass the Trainer on; each folder taken as one file: "
          f"{trainer_side['by_package']} (merging the files of a folder would not lower it)")
    print(f"    the same walk recording the caller's file again after each call: {walk['visits']} function visits, "
          f"{walk['stays']} stays in {walk['files']} files, {walk['returns']} returns "
          f"(the trainer side alone: {trainer_side['returns']})")
    for file, n in walk["re-entered"].items():  # type: ignore[union-attr]
        print(f"      {file} re-entered {n}x")
    narrow = follow_trainer_narrow(False)
    print(f"    (the narrower walk, the Trainer itself among a call's arguments: {narrow['visits']} visits, "
          f"{narrow['returns']} returns)")
    longest = functions()
    over = [f for f in longest if f[0] > 60]
    print(f"(b) longest functions in trainer/ and plugins/ ({len(over)} over 60 lines):")
    for n, where in longest[:10]:
        print(f"      {n:4d}  {where}")
    found = local_import_list()
    kept = [f for f in found if f.reason]
    bare = [f for f in found if not f.reason]
    files = lambda items: len({f.where.split(":")[0] for f in items})  # noqa: E731
    print(f"(c) function-local imports of trainer.*/plugins.*: {len(found)} in {files(found)} files")
    print(f"      kept, with reason (a `# {KEPT_MARK} why` comment): {len(kept)} in {files(kept)} files")
    print(f"      without a reason: {len(bare)} in {files(bare)} files")
    if args.imports:
        for f in sorted(found, key=lambda f: (f.reason is None, f.where)):
            print(f"      {f.where}  {f.statement}" + (f"  -- {f.reason}" if f.reason else ""))
    print(f"(d) Trainer.__init__: {trainer_init_lines()} lines")
    found, lines = any_in_annotations(ROOT, "trainer")
    print(f"(e) `Any` in annotations: {found} in {lines} lines of trainer/, {1000 * found / lines:.1f} per 1,000 lines")
    for package in ("trainer/lightning_compat", "plugins"):
        found, lines = any_in_annotations(ROOT, package)
        print(f"      {package}/: {found}, {1000 * found / lines:.1f} per 1,000 lines")
    lightning = _lightning_root()
    if lightning is not None:
        for package in ("lightning/pytorch", "lightning/fabric"):
            found, lines = any_in_annotations(lightning, package)
            print(f"      installed {package}/ for reference: {found}, {1000 * found / lines:.1f} per 1,000 lines")
    reference = follow_lightning(False)
    if reference is not None:
        with_fabric = follow_lightning(False, fabric=True)
        print(f"(f) the route (a) walked the same way over the installed Lightning from Trainer._run: "
              f"{reference['entry_returns']} returns in lightning/pytorch ({with_fabric['entry_returns']} entering "
              f"lightning/fabric too); {reference['between_passing_files']} between the files that pass it on, "
              f"{reference['by_package']} with each folder as one file")


if __name__ == "__main__":
    main()


# Figures (python benchmarks/code_shape.py; the tree before the per-call object and the resume package, 9c18722,
# measured with this script's walkers pointed at its trainer/loops/run.py:run_stage):
#   before: function entries only 44, the trainer side alone 36 (the count closest to the 38 first reported for that
#           tree); recording the caller again: 128 visits, 123 stays in 32 files, 91 returns, trainer side 69;
#           narrower walk 12 returns
#   now:    see the first lines this script prints (the Concepts page quotes them with their date)
