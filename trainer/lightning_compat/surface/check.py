"""Lightning's surface, checked on what this process serves: module imports, names, public signatures.

Used by ``tests/compat/test_lightning_surface.py`` and ``docs/make_lightning_api.py`` with the zero-edit mode
installed, so ``lightning.pytorch.x`` is Relay's alias. A signature matches when Relay's callable accepts every
call Lightning's accepts the same way: Lightning's parameters in the same order with the same kinds and defaults;
Relay may give a default where Lightning requires the argument, and add parameters only where no call to
Lightning's could reach them (after Lightning's positional ones,
with a default, or as ``*args``/``**kwargs``); where Lightning's takes ``*args``, Relay may name the positional
arguments they stand for (a callback hook's ``(trainer, pl_module)``).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any

from trainer.lightning_compat import surface
from trainer.lightning_compat.surface.walk import method_signature, signature

ALIASES = {"lightning.pytorch": "pytorch_lightning", "lightning.fabric": "lightning_fabric"}


def under_roots(module: str) -> list[str]:
    """``module`` under each of the names it is served as (``lightning.*`` and ``pytorch_lightning.*`` or
    ``lightning_fabric.*``)."""
    for real, alias in ALIASES.items():
        if module == real or module.startswith(real + "."):
            return [module, alias + module[len(real):]]
    return [module]


@dataclass
class Report:
    modules: int = 0
    modules_failed: dict[str, str] = field(default_factory=dict)  # "lightning.x" -> error
    names: int = 0
    names_failed: dict[str, str] = field(default_factory=dict)  # "module:name" -> error
    signatures: int = 0
    signatures_failed: dict[str, str] = field(default_factory=dict)  # "module:name[.method]" -> difference
    # served names that raise when used (an engine internal Relay does not run): "module:name" -> its reason
    refused_failed: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        return (f"modules importing {self.modules - len(self.modules_failed)}/{self.modules}, "
                f"names resolving {self.names - len(self.names_failed)}/{self.names}, "
                f"signatures matching {self.signatures - len(self.signatures_failed)}/{self.signatures}")


def difference(lightning: list[list[str]], relay: list[list[str]] | None) -> str | None:
    """Why ``relay`` does not accept what ``lightning`` accepts, or None when it does (the rule above)."""
    if relay is None:
        return "no signature"
    mine = {p[0]: p for p in relay}
    for p in lightning:
        if p[0] not in mine and p[1] not in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            return f"parameter {p[0]!r} missing"
    ordered = {p[0] for p in lightning  # keyword-only ones have no order
               if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD") and p[0] in mine}
    wanted = [p[0] for p in relay if p[0] in ordered]
    if wanted != [p[0] for p in lightning if p[0] in ordered]:
        return f"order {wanted} (Lightning {[p[0] for p in lightning if p[0] in ordered]})"
    for p in lightning:
        q = mine.get(p[0])
        if q is None:
            continue
        if q[1] != p[1]:
            return f"{p[0]!r} is {q[1]} (Lightning {p[1]})"
        if q[2] != p[2] and p[2] != "<required>":  # a default where Lightning has none accepts more
            return f"{p[0]!r} defaults to {q[2]} (Lightning {p[2]})"
    positional = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
    takes_args = any(p[1] == "VAR_POSITIONAL" for p in lightning)
    last = max((i for i, p in enumerate(relay) if p[0] in {q[0] for q in lightning} and p[1] in positional),
               default=-1)
    for i, p in enumerate(relay):
        if p[0] in {q[0] for q in lightning} or p[1] in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            continue
        if p[2] == "<required>" and not (takes_args and p[1] in positional):
            return f"extra required parameter {p[0]!r}"
        if p[1] in positional and i < last:
            return f"extra positional parameter {p[0]!r} before Lightning's"
    return None


def _refused(obj: object) -> str | None:
    """The reason a served name raises when used (its ``__relay_refused__``), or None."""
    try:
        why = getattr(obj, "__relay_refused__", None)
    except Exception:  # noqa: BLE001 - an object whose attribute lookup fails is not a refused stand-in
        return None
    return why if isinstance(why, str) else None


def check(data: dict[str, Any] | None = None, signatures: bool = True) -> Report:
    """Import every module under every root, resolve every name, compare every public signature."""
    data = data or surface.load()
    modules = data["modules"]
    report = Report()
    for alias in data.get("module_aliases", {}):  # paths Lightning's graveyard keeps importable
        for path in under_roots(alias):
            report.modules += 1
            try:
                importlib.import_module(path)
            except Exception as err:  # noqa: BLE001 - any failure is a finding
                report.modules_failed[path] = f"{type(err).__name__}: {err}"
    for name, spec in modules.items():
        served = []
        for path in under_roots(name):
            report.modules += 1
            try:
                served.append(importlib.import_module(path))
            except Exception as err:  # noqa: BLE001 - any failure is a finding
                report.modules_failed[path] = f"{type(err).__name__}: {err}"
        if not served:
            report.names += len(spec["names"])
            report.names_failed.update({f"{name}:{n}": "module does not import" for n in spec["names"]})
            continue
        module = served[0]
        for attr, entry in spec["names"].items():
            report.names += 1
            try:
                obj = getattr(module, attr)
            except Exception as err:  # noqa: BLE001
                report.names_failed[f"{name}:{attr}"] = f"{type(err).__name__}: {err}".splitlines()[0]
                continue
            refused = _refused(obj)
            if refused:
                report.refused_failed[f"{name}:{attr}"] = refused
            if not signatures or entry["kind"] == "reexport" or attr.startswith("_"):
                continue
            if "signature" in entry and entry["signature"] is not None:
                report.signatures += 1
                why = difference(entry["signature"], signature(obj))
                if why:
                    report.signatures_failed[f"{name}:{attr}"] = why
            for method, sig in (entry.get("methods") or {}).items():
                if sig is None:
                    continue
                report.signatures += 1
                if not hasattr(obj, method):
                    report.signatures_failed[f"{name}:{attr}.{method}"] = "method missing"
                    continue
                why = difference(sig, method_signature(obj, method))
                if why:
                    report.signatures_failed[f"{name}:{attr}.{method}"] = why
    return report


def main() -> None:
    """``python -m trainer.lightning_compat.surface.check [-v | --json]``: the counts in the zero-edit mode (``-v``:
    and every failure; ``--json``: the whole report as JSON, for the test and the doc generator)."""
    import json
    import warnings

    from trainer.lightning_compat import install  # local import: only the command installs the finder

    install(children=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check()
        probes = __import__("trainer.lightning_compat.surface.probes", fromlist=["run"]).run()
        refused = __import__("trainer.lightning_compat.surface.arguments", fromlist=["refused"]).refused(surface.load())
    if "--json" in sys.argv:
        print(json.dumps({**report.__dict__, "probes": probes, "arguments_refused": refused}, indent=1,
                         sort_keys=True))
        return
    print(report.summary())
    if "-v" in sys.argv:
        for title, failed in (("modules", report.modules_failed), ("names", report.names_failed),
                              ("signatures", report.signatures_failed)):
            print(f"\n# {title} ({len(failed)})")
            for key, why in failed.items():
                print(f"{key}: {why}")


if __name__ == "__main__":
    main()
