"""Config mistakes as one line a user can act on: the key, the bad value, valid choices, a working override."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Callable, Sequence


class ConfigError(Exception):
    """A mistake in the config or the overrides; printed as one line, without a traceback."""


def _did_you_mean(value: str, valid: Sequence[str], n: int = 3) -> str:
    close = difflib.get_close_matches(value, list(valid), n=n, cutoff=0.5)
    return f" Did you mean {', '.join(close)}?" if close else ""


def unknown_option(group: str, option: str, options: Sequence[str]) -> str:
    if not options:
        return f"There is no config group '{group}' (asked for {group}={option})."
    return (f"Unknown {group} option '{option}' ({group}={option}).{_did_you_mean(option, options)} "
            f"Valid options: {', '.join(options)}. For example: {group}={options[0]}")


def missing_node(group: str, options: Sequence[str]) -> str:
    choose = f"add {group}=<name> (options: {', '.join(options)})" if options else f"add {group}=<name>"
    return (f"No {group} config: {choose}, or write {group}/<name>.yaml with a _target_ in your configs "
            f"and list '- {group}: <name>' in config.yaml's defaults.")


def _type_name(tp: object) -> str:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Union:
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    return getattr(tp, "__name__", str(tp))


_EXAMPLES = {int: "3", float: "0.5", bool: "true", str: "text"}


def _example(tp: object) -> str:
    for option in (tp, *typing.get_args(tp)):
        if option in _EXAMPLES:
            return _EXAMPLES[option]
    return "null"


def _schema_keys(object_type: object) -> list[str] | None:
    if isinstance(object_type, type) and dataclasses.is_dataclass(object_type):
        return [f.name for f in dataclasses.fields(object_type)]
    return None


def _override_value(full_key: str, overrides: Sequence[str]) -> str:
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key == full_key:
            return value
    return "?"


def explain(exc: BaseException, overrides: Sequence[str], options_of: Callable[[str], list[str]],
            keys_of: Callable[[str], list[str]]) -> str:
    """One line for a Hydra/OmegaConf composition error.

    ``options_of(group)`` lists a group's options; ``keys_of(node)`` lists the keys a config node has.
    """
    text = str(exc)
    cause = exc.__cause__
    found = re.search(r"Could not (?:find|load) '([^']+)/([^'/]+)'", text)
    if found:
        group, option = found.groups()
        return unknown_option(group, option, options_of(group))
    found = re.search(r"You must specify '([^']+)'", text)
    if found:
        return missing_node(found.group(1), options_of(found.group(1)))
    full_key = getattr(cause, "full_key", None)
    if full_key and type(cause).__name__ in ("ConfigAttributeError", "ConfigKeyError"):
        parent, _, name = full_key.rpartition(".")
        keys = _schema_keys(getattr(cause, "object_type", None)) or keys_of(parent)
        where = f"'{parent}'" if parent else "the top level"
        return (f"Unknown key '{full_key}'.{_did_you_mean(name, keys, n=1)} Keys in {where}: {', '.join(keys)}. "
                f"To add a new key on purpose, write +{full_key}={_override_value(full_key, overrides)}")
    if full_key and type(cause).__name__ == "ValidationError":
        parent, _, name = full_key.rpartition(".")
        object_type = getattr(cause, "object_type", None)
        hints = typing.get_type_hints(object_type) if _schema_keys(object_type) else {}
        expected = f"expected {_type_name(hints[name])}" if name in hints else "wrong type"
        detail = str(getattr(cause, "msg", "") or cause).splitlines()[0]
        example = f" For example: {full_key}={_example(hints[name])}" if name in hints else ""
        return f"Bad value for '{full_key}' ({full_key}={_override_value(full_key, overrides)}): {expected}; {detail}.{example}"
    if "Ambiguous value for argument" in text:
        return text.splitlines()[0] + ": to try each value add -m (multirun); for a list write key=[a,b]."
    found = re.search(r"Could not override '([^']+)'\. No match in the defaults list", text)
    if found:
        return (f"There is no config group or key '{found.group(1)}'. Config groups: "
                f"{', '.join(options_of(''))}. To add a new key on purpose, write +{found.group(1)}=...")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    message = " ".join(lines[:2]) if lines else type(exc).__name__
    if cause is not None:
        message += f" ({str(cause).splitlines()[0] if str(cause) else type(cause).__name__})"
    return message
