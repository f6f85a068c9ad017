"""One registry of plugins by short name, filled with Relay's built-ins and third-party entry points.

A name maps to an import path plus default arguments, so one class can be registered under several
names (``"ddp"``, ``"ddp_find_unused_parameters_true"``) and nothing is imported until it is used.
Third-party packages add plugins without touching Relay by declaring entry points in the groups
``relaytrain.accelerators``, ``relaytrain.strategies``, ``relaytrain.precision`` and
``relaytrain.environments``. An entry point may name a plugin class (registered under the entry
point's name) or a function ``register(registry)`` that registers any number of names.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from plugins.builtin import PRECISION_ALIASES, register_builtins

KINDS = ("accelerator", "strategy", "precision", "environment")
ENTRY_POINT_GROUPS = {
    "accelerator": "relaytrain.accelerators",
    "strategy": "relaytrain.strategies",
    "precision": "relaytrain.precision",
    "environment": "relaytrain.environments",
}


class UnknownPluginError(ValueError):
    """An unknown short name; the message lists the close matches and every valid name."""


class PluginEntry(NamedTuple):
    """A registered name: what it builds and with which default arguments (a record: a tuple is cheaper to define
    than a dataclass, and the registry makes about fifty of them on a Trainer's first use)."""

    kind: str
    name: str
    target: str | type  # "package.module:Class" (imported on use) or the class itself
    description: str = ""
    defaults: Mapping[str, Any] = MappingProxyType({})  # read only: `register` passes each entry its own dict
    source: str = "relaytrain"

    def load(self) -> type:
        if not isinstance(self.target, str):
            return self.target
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def create(self, **kwargs: Any) -> Any:
        return self.load()(**{**self.defaults, **kwargs})


class Registry:
    """Short names to plugin entries, per kind; entry points are read on the first lookup of a kind."""

    def __init__(self, load_entry_points: bool = True) -> None:
        self._entries: dict[str, dict[str, PluginEntry]] = {kind: {} for kind in KINDS}
        self._pending_groups = set(KINDS) if load_entry_points else set()

    def register(
        self, kind: str, name: str, target: str | type, description: str = "", *, source: str = "relaytrain",
        replace: bool = False, **defaults: Any,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"Plugin kind {kind!r} is not one of {', '.join(KINDS)}.")
        if name in self._entries[kind] and not replace:
            existing = self._entries[kind][name]
            raise ValueError(
                f"The {kind} name {name!r} is already registered by {existing.source} ({existing.target}); "
                "pick another name or pass replace=True."
            )
        if not description and not isinstance(target, str):
            description = (target.__doc__ or "").strip().splitlines()[0] if target.__doc__ else ""
        self._entries[kind][name] = PluginEntry(kind, name, target, description, dict(defaults), source)

    def unregister(self, kind: str, name: str) -> None:
        """Forget ``name`` (a test's or a user's temporary plugin); an unknown name is the ``get`` error."""
        self.get(kind, name)
        del self._entries[kind][name]

    def _load_entry_points(self, kind: str) -> None:
        if kind not in self._pending_groups:
            return
        self._pending_groups.discard(kind)
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUPS[kind]):
            source = ep.dist.name if getattr(ep, "dist", None) is not None else ep.value
            try:
                obj = ep.load()
            except Exception as err:  # a broken third-party package must not break Relay
                import warnings

                warnings.warn(f"Could not load {kind} plugin {ep.name!r} from {source}: {err}", stacklevel=3)
                continue
            if isinstance(obj, type):
                self.register(kind, ep.name, obj, source=source)
            elif callable(obj):
                obj(self)
            else:
                raise TypeError(f"Entry point {ep.name!r} in {ENTRY_POINT_GROUPS[kind]} is neither a class nor callable.")

    def entries(self, kind: str) -> dict[str, PluginEntry]:
        self._load_entry_points(kind)
        return dict(self._entries[kind])

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries(kind))

    def has(self, kind: str, name: str) -> bool:
        """Whether ``name`` is registered; a built-in name is answered without reading the installed packages'
        entry points (reading them scans every installed distribution: about 0.1 s in a full environment)."""
        return name in self._entries[kind] or name in self.entries(kind)

    def get(self, kind: str, name: str, argument: str | None = None) -> PluginEntry:
        """The entry for ``name``; ``argument`` is the Trainer argument an error names (default: ``kind``).

        Entry points cannot replace a registered name (``register`` refuses), so a name already known is returned
        before they are read. A name in other case (``"DDP"``) finds the registered lower-case one."""
        known = self._entries[kind].get(name)
        if known is not None:
            return known
        entries = self.entries(kind)
        if name in entries:
            return entries[name]
        if isinstance(name, str) and name.lower() in entries:  # names are case-insensitive, as in Lightning ("DDP")
            return entries[name.lower()]
        close = difflib.get_close_matches(str(name), list(entries), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownPluginError(
            f"Unknown {kind} {name!r} (Trainer({argument or kind}={name!r})).{hint} "
            f"Valid names: {', '.join(sorted(entries))}."
        )

    def create(self, kind: str, name: str, **kwargs: Any) -> Any:
        return self.get(kind, name).create(**kwargs)

    def __iter__(self) -> Iterator[PluginEntry]:
        for kind in KINDS:
            yield from (self.entries(kind)[n] for n in self.names(kind))


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    """Relay's built-ins plus installed entry points (built once per process)."""
    registry = Registry()
    register_builtins(registry)
    return registry


def selection_names() -> dict[str, dict[str, str]]:
    """Names every argument also accepts besides the registered plugins: ``auto``, ``gpu``, Lightning's aliases."""
    # local import: the registry imports no plugin module until one is used (detect imports every environment)
    from plugins.environments.detect import DETECTION_ORDER

    return {
        "accelerator": {"auto": "The first GPU kind present (cuda, rocm, xpu, mps), else cpu",
                        "gpu": "The GPU kind present (cuda, rocm, xpu or mps); an error without one"},
        "strategy": {"auto": "single_device for one process, ddp for several, horovod under horovodrun"},
        "precision": {alias: f"Lightning's name for {name}" for alias, name in PRECISION_ALIASES.items()},
        "environment": {"auto": f"Detected: {', '.join(cls.name for cls in DETECTION_ORDER)}, else local"},
    }


def describe(registry: Registry | None = None, write: Callable[[str], Any] = print) -> None:
    """One line per name each plugin argument accepts: registered plugins (with where they come from),
    then ``auto``, ``gpu`` and Lightning's aliases."""
    registry = registry or default_registry()
    extra = selection_names()
    for kind in KINDS:
        entries = registry.entries(kind)
        more = extra.get(kind, {})
        write(f"{kind}:")
        width = max((len(n) for n in [*entries, *more]), default=0)
        for name in sorted(entries):
            entry = entries[name]
            origin = "" if entry.source == "relaytrain" else f"  [{entry.source}]"
            write(f"  {name:<{width}}  {entry.description}{origin}")
        for name, text in more.items():
            if name not in entries:
                write(f"  {name:<{width}}  {text}")
