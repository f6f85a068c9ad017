"""Compose the config in-process before Hydra runs it, so mistakes become one clean line.

Hydra's own reports span several lines and end with a hint about stack traces; composing once here
with the same search path and overrides turns each mistake into a ``ConfigError`` instead.
For a multirun, every value of every sweep is composed (the others at their first value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trainer.cli.errors import ConfigError, explain, missing_node
from trainer.cli.schema import register_configs

if TYPE_CHECKING:
    from omegaconf import DictConfig

REQUIRED_NODES = ("model", "data")


def _sweep_variants(overrides: Sequence[str]) -> Iterator[list[str]]:
    """The override lists to compose: one per sweep value, others at their first value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - the compose below reports the parse error in its own words
        yield list(overrides)
        return
    values = [list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.input_line] for o in parsed]
    keys = [o.get_key_element() for o in parsed]
    first = [f"{k}={v[0]}" if o.is_sweep_override() else v[0] for k, v, o in zip(keys, values, parsed)]
    yield first
    for i, o in enumerate(parsed):
        for value in values[i][1:] if o.is_sweep_override() else []:
            yield [*first[:i], f"{keys[i]}={value}", *first[i + 1:]]


def require_nodes(cfg: DictConfig, options_of: Callable[[str], list[str]] | None = None) -> None:
    """A model and a data config must be present (deleted with ~model, or never chosen, is an error)."""
    for name in REQUIRED_NODES:
        node = cfg.get(name) if hasattr(cfg, "get") else None
        if not node:
            raise ConfigError(missing_node(name, options_of(name) if options_of else []))


def compose_checked(config_dir: str, config_name: str, overrides: Sequence[str], multirun: bool = False) -> Any:
    """Compose (each sweep variant when ``multirun``); the first variant's config, or a ``ConfigError``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base="1.3", job_name="relay"):
        loader = GlobalHydra.instance().config_loader()

        def options_of(group: str) -> list[str]:
            names = loader.list_groups("") if not group else loader.get_group_options(group)
            return [n for n in names if n not in ("hydra", "base")]

        def keys_of(node: str) -> list[str]:
            groups = set(options_of(""))
            choices = [o for o in overrides if o.lstrip("+~").partition("=")[0] in groups]
            try:  # the config with only the group choices: the keys the node has before any value override
                base = compose(config_name, overrides=choices)
            except Exception:  # noqa: BLE001 - a group choice is wrong too; list nothing rather than fail
                return []
            found = OmegaConf.select(base, node) if node else base
            return sorted(k for k in (found.keys() if hasattr(found, "keys") else []) if k != "_target_")

        variants = list(_sweep_variants(overrides)) if multirun else [list(overrides)]
        first = None
        for variant in variants:
            try:
                cfg = compose(config_name, overrides=variant, return_hydra_config=True)
            except Exception as exc:  # noqa: BLE001 - every composition error becomes one line
                raise ConfigError(explain(exc, variant, options_of, keys_of)) from None
            require_nodes(cfg, options_of)
            first = cfg if first is None else first
        return first
