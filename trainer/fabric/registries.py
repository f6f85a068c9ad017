"""``ACCELERATOR_REGISTRY`` and ``STRATEGY_REGISTRY`` with Lightning's methods, as views of Relay's one plugin
registry (``plugins.registry.default_registry()``).

A name registered here is a name ``Trainer(accelerator=...)``/``Trainer(strategy=...)`` and the Hydra configs
accept, and Relay's built-ins and entry-point plugins are listed here: there is no second registry to keep in sync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from plugins.registry import UnknownPluginError, default_registry
from trainer.errors import MisconfigurationException


class LightningRegistryView(Mapping[str, dict[str, Any]]):
    """One plugin kind of Relay's registry, through Lightning's ``_AcceleratorRegistry``/``_StrategyRegistry``
    methods; ``registry[name]`` is Lightning's record (``description``, ``init_params``, the class)."""

    def __init__(self, kind: str, noun: str) -> None:
        self.kind, self.noun = kind, noun

    def _register(self, name: str, plugin: Callable | None, description: str | None, override: bool,
                  init_params: dict[str, Any]) -> Callable:
        """Register ``plugin`` (a class or factory) under ``name``; without ``plugin``, a decorator that does."""
        if not isinstance(name, str):
            raise TypeError(f"`name` must be a str, found {name}")
        if name in self and not override:
            raise MisconfigurationException(f"'{name}' is already present in the registry. HINT: Use `override=True`.")

        def do_register(target: Callable) -> Callable:
            default_registry().register(self.kind, name, target, description or "", source="user", replace=True,
                                        **init_params)
            return target

        return do_register(plugin) if plugin is not None else do_register

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """A new object of the plugin registered as ``name``, built with its registered arguments."""
        if name in self:
            return default_registry().create(self.kind, name)
        if default is not None:
            return default
        raise KeyError(f"'{name}' not found in registry. Available names: {self._names()}")

    def remove(self, name: str) -> None:
        try:
            default_registry().unregister(self.kind, name)
        except UnknownPluginError as err:
            raise KeyError(name) from err

    def _names(self) -> set[str]:
        return set(default_registry().entries(self.kind))

    def __getitem__(self, name: str) -> dict[str, Any]:
        entries = default_registry().entries(self.kind)
        if name not in entries:
            raise KeyError(name)
        entry = entries[name]
        return {"description": entry.description, "init_params": dict(entry.defaults), self.noun: entry.load(),
                f"{self.noun}_name": name}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in default_registry().entries(self.kind)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())

    def __str__(self) -> str:
        return f"Registered {self.noun.capitalize()}s: {', '.join(sorted(self._names()))}"


class AcceleratorRegistry(LightningRegistryView):
    def __init__(self) -> None:
        super().__init__("accelerator", "accelerator")

    def register(self, name: str, accelerator: Callable | None = None, description: str = "", override: bool = False,
                 **init_params: Any) -> Callable:
        """Register ``accelerator`` under ``name`` (used as a decorator when ``accelerator`` is not given)."""
        return self._register(name, accelerator, description, override, init_params)

    def available_accelerators(self) -> set[str]:
        """Registered names, and the names Lightning knows that no machine here can run ("tpu": the Trainer
        accepts the name and says what is missing)."""
        from plugins.selection import UNRUNNABLE  # local import: the selection module loads on use

        return self._names() | set(UNRUNNABLE)


class StrategyRegistry(LightningRegistryView):
    def __init__(self) -> None:
        super().__init__("strategy", "strategy")

    def register(self, name: str, strategy: Callable | None = None, description: str | None = None,
                 override: bool = False, **init_params: Any) -> Callable:
        """Register ``strategy`` under ``name`` (used as a decorator when ``strategy`` is not given)."""
        return self._register(name, strategy, description, override, init_params)

    def available_strategies(self) -> list[str]:
        """Registered strategy names (a list, as Lightning's)."""
        return sorted(self._names())


ACCELERATOR_REGISTRY = AcceleratorRegistry()
STRATEGY_REGISTRY = StrategyRegistry()

__all__ = ["ACCELERATOR_REGISTRY", "STRATEGY_REGISTRY", "AcceleratorRegistry", "StrategyRegistry"]
