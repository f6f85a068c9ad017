"""``python -m trainer --help``: each config group with its chosen option and the others by name, then
the plain settings (trainer, model, data, top level). Plugin nodes are shown by the option's name, not
by the ``_target_`` internals they compose to."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from trainer.arguments.trainer_arguments import TrainerArguments, spec_of
from trainer.cli.check import compose_checked

if TYPE_CHECKING:
    from omegaconf import DictConfig

PLUGIN_GROUPS = ("accelerator", "strategy", "precision", "environment", "logger", "callbacks", "profiler")


def _value(value: object) -> str:
    from omegaconf import ListConfig, OmegaConf

    if isinstance(value, ListConfig):
        return "[" + ",".join(map(_value, OmegaConf.to_container(value, resolve=False))) + "]"
    if value is None:
        return "null"
    if value == "":
        return "''"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _flat(node: object, prefix: str) -> list[str]:
    from omegaconf import DictConfig

    if not isinstance(node, DictConfig):
        return [f"{prefix}={node}"] if node is not None else []
    out: list[str] = []
    for key in node:
        if key in ("_target_", "_args_"):
            continue
        value = node[key]
        if isinstance(value, DictConfig):
            out += _flat(value, f"{prefix}.{key}")
        else:
            out.append(f"{prefix}.{key}={_value(value)}")
    return out


def argument_lines(trainer_node: DictConfig | None, choices: Mapping[str, object], arguments: type = TrainerArguments) -> list[str]:
    """One line per Trainer argument, from the dataclass: how to set it here (its current value) and what it does."""
    lines = []
    for f in dataclasses.fields(arguments):
        spec = spec_of(f)
        if spec.group == "trainer":
            setting = f"trainer.{f.name}={_value(trainer_node.get(f.name) if trainer_node is not None else f.default)}"
        else:
            setting = f"{spec.group}={choices.get(spec.group) or 'none'}"
        named = "" if spec.group in ("trainer", f.name) else f"({f.name}) "
        lines.append(f"  {setting:<44} {named}{spec.help}")
    return lines


def help_text(config_dir: str, config_name: str, overrides: Sequence[str]) -> str:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    compose_checked(config_dir, config_name, overrides)  # a mistake is the usual one-line error
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base="1.3", job_name="relay"):
        loader = GlobalHydra.instance().config_loader()
        cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
        groups = [g for g in loader.list_groups("") if g != "hydra"]
        options = {g: [o for o in loader.get_group_options(g) if o != "base"] for g in groups}
    choices = dict(cfg.hydra.runtime.choices)
    lines = [str(cfg.hydra.help.header).rstrip(), "", "== Config groups (group=option; * = chosen) =="]
    width = max(len(g) for g in groups)
    for group in sorted(groups):
        chosen = str(choices.get(group) or "none")
        names = ", ".join(f"*{o}" if o == chosen else o for o in options[group])
        lines.append(f"  {group:<{width}}  {chosen:<14} options: {names}")
    lines.append("  (several callbacks: callbacks=[default,early_stopping]; a plugin's setting: strategy.timeout=600;")
    lines.append("   precision also takes Lightning's names 16, 32, 64, bf16, half; every plugin: python -m trainer plugins)")
    settings = [s for g in PLUGIN_GROUPS if g in cfg for s in _flat(cfg[g], g)]
    if settings:
        lines += ["", "== Settings of the chosen plugins (override with key=value) =="]
        lines += [f"  {s}" for s in settings]
    lines += ["", "== Trainer arguments (trainer.KEY=VALUE; the plugin ones are the config groups above) =="]
    lines += argument_lines(cfg.get("trainer"), choices)
    plain = {k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items()
             if k not in (*PLUGIN_GROUPS, "hydra", "trainer")}
    for node in ("model", "data"):
        if isinstance(plain.get(node), dict):
            plain[node] = {k: v for k, v in plain[node].items() if k != "_target_"}
    lines += ["", "== Config (override any key with key=value) ==", OmegaConf.to_yaml(plain).rstrip(), "",
              str(cfg.hydra.help.footer).rstrip()]
    return "\n".join(lines)
