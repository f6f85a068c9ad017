"""The configuration reference: every Hydra config group, option and key, generated from the configs and the schema.

``python docs/make_config_reference.py`` prints the page; the site build (docs/site_hooks.py) generates it as
``reference/configuration.md``, so the site always shows the tree it was built from. Sources:

- the ``trainer`` group: ``trainer.arguments.trainer_arguments.TrainerArguments`` (the typed schema,
  ``trainer/cli/schema.py``, is made from it): every argument set under ``trainer.``, its type, default and help
  line, and the defaults that ``configs/trainer/default.yaml`` changes;
- every other group: the YAML files under ``configs/``: each option's comment, ``_target_`` and keys, with each key's
  type read from the target's signature (statically, without importing optional engines) and its comment.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SKIP_GROUPS = {"hydra"}  # Hydra's own help and output settings (Relay's run directories), not a choice users make


def leading_comment(text: str) -> str:
    """The comment lines at the top of a YAML file, joined (``# @package`` lines left out)."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def key_comments(text: str) -> dict[str, str]:
    """``{key: comment}`` for the keys of a YAML file: the comment on the key's line
    (``key: value  # comment``), else the comment lines right above it (not the file's leading comment)."""
    comments, above, started = {}, [], False
    for line in text.splitlines():
        if line.startswith("#"):
            if started:
                above.append(line.lstrip("#").strip())
            continue
        started = True
        if line.strip()[:1].isalpha() and ":" in line:
            key, rest = line.split(":", 1)
            if "#" in rest:
                comments[key.strip()] = rest.split("#", 1)[1].strip()
            elif above:
                comments[key.strip()] = " ".join(above)
        above = []
    return comments


def signature_types(target: str, depth: int = 0) -> dict[str, str]:
    """The parameter annotations of a ``_target_`` (a class's ``__init__``, with its base classes' for the keywords
    it passes on, or a function), read from the source: no optional engine is imported."""
    module, _, name = target.rpartition(".")
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    if not path.is_file() or depth > 5:
        return {}
    tree = ast.parse(path.read_text())
    found = {node.name: node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    imported = {alias.asname or alias.name: f"{node.module}.{alias.name}"
                for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                for alias in node.names}
    node = found.get(name)
    if node is None:
        return signature_types(imported[name], depth + 1) if name in imported else {}
    types: dict[str, str] = {}
    if isinstance(node, ast.ClassDef):
        function = next((item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"),
                        None)
        for base in reversed(node.bases):  # a base's keywords, overridden by the class's own
            if isinstance(base, ast.Name):
                where = f"{module}.{base.id}" if base.id in found else imported.get(base.id)
                if where:
                    types.update(signature_types(where, depth + 1))
    else:
        function = node
    if function is not None:
        arguments = function.args.posonlyargs + function.args.args + function.args.kwonlyargs
        types.update({a.arg: ast.unparse(a.annotation) for a in arguments if a.annotation is not None})
    return types


def type_name(tp: typing.Any) -> str:
    text = getattr(tp, "__name__", None) if not typing.get_args(tp) else None
    return text or str(tp).replace("typing.", "")


def cell(value: typing.Any) -> str:
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, (dict, list)):
        text = yaml.safe_dump(value, default_flow_style=True).strip()
    else:
        text = str(value)
    return f"`{text}`" if text else '`""`'


def escape(text: str) -> str:
    """Prose from a comment or a help line, safe in a Markdown table cell (``<run dir>`` is not an HTML tag)."""
    return text.replace("<", "&lt;").replace("|", "\\|")


def trainer_group() -> list[str]:
    from trainer.arguments.trainer_arguments import TrainerArguments, spec_of
    from trainer.cli.schema import TrainerConfig  # the schema the CLI composes with

    path = CONFIGS / "trainer" / "default.yaml"
    overrides = yaml.safe_load(path.read_text()) or {}
    checked = {f.name: type_name(f.type) for f in dataclasses.fields(TrainerConfig)}
    lines = ["## `trainer`", "",
             "The Trainer's own arguments, typed: a misspelt key or a value of the wrong type fails when the config "
             "is composed, naming the key (`trainer.max_epoch=3` suggests `max_epochs`). Generated from "
             "`trainer.arguments.trainer_arguments.TrainerArguments`, which also makes the schema "
             "(`trainer/cli/schema.py`) and "
             "`python -m trainer --help`. Accelerator, strategy, precision, loggers, callbacks and the profiler are "
             "their own groups (below).", "",
             "The type is the argument's; where it is one scalar (`int`, `float`, `bool`, `str`, optional or not) "
             "the schema checks it when the config is composed, and the Trainer checks the rest.", "",
             "| key | type | default | what it does |", "|---|---|---|---|"]
    for f in dataclasses.fields(TrainerArguments):
        spec = spec_of(f)
        if spec.group != "trainer":
            continue
        default = cell(f.default)
        if f.name in overrides:
            default = f"{cell(overrides[f.name])} (Python: {default})"
        kind = f.type if isinstance(f.type, str) else type_name(f.type)
        kind = checked[f.name] if kind == "Any" else kind
        lines.append(f"| `trainer.{f.name}` | `{escape(kind)}` | {default} | "
                     f"{escape(spec.help)}; {escape(spec.valid)} |")
    return lines


def root_keys() -> list[str]:
    text = (CONFIGS / "config.yaml").read_text()
    config = yaml.safe_load(text)
    comments = key_comments(text)
    groups = [next(iter(d)) if isinstance(d, dict) else d for d in config["defaults"]]
    chosen = {next(iter(d)): d[next(iter(d))] for d in config["defaults"] if isinstance(d, dict)}
    lines = ["## Top level (`configs/config.yaml`)", "", escape(leading_comment(text)), "",
             "| group | default option |", "|---|---|"]
    for group in groups:
        if group in ("_self_",) or str(group).startswith("override "):
            continue
        lines.append(f"| [`{group}`](#{group}) | {cell(chosen.get(group))} |")
    lines += ["", "| key | default | what it does |", "|---|---|---|"]
    for key, value in config.items():
        if key in ("defaults", "hydra"):
            continue
        lines.append(f"| `{key}` | {cell(value)} | {escape(comments.get(key, ''))} |")
    return lines


def option_section(group: str, path: Path) -> list[str]:
    text = path.read_text()
    option = path.stem
    node = yaml.safe_load(text)
    lines = [f"### `{group}={option}`", ""]
    about = leading_comment(text)
    if about:
        lines += [escape(about), ""]
    if not isinstance(node, dict) or not node:
        return lines
    global_package = "# @package _global_" in text
    if global_package or "defaults" in node:
        lines += ["```yaml", text.strip(), "```", ""]
        return lines
    prefix = group
    if len(node) == 1 and isinstance(next(iter(node.values())), dict):  # one named node: callbacks.<name>.<key>
        name, node = next(iter(node.items()))
        prefix = f"{group}.{name}"
    target = node.get("_target_")
    types = signature_types(target) if isinstance(target, str) else {}
    comments = key_comments(text)
    if target:
        lines += [f"Builds `{target}`.", ""]
    rows = [(k, v) for k, v in node.items() if not k.startswith("_")]
    if rows:
        lines += ["| key | type | default | note |", "|---|---|---|---|"]
        for key, value in rows:
            kind = f"`{escape(types[key])}`" if key in types else ""
            lines.append(f"| `{prefix}.{key}` | {kind} | {cell(value)} | {escape(comments.get(key, ''))} |")
        lines.append("")
    return lines


def groups() -> list[str]:
    return sorted(p.name for p in CONFIGS.iterdir()
                  if p.is_dir() and p.name not in SKIP_GROUPS and not p.name.startswith("_") and p.name != "trainer")


def render() -> str:
    lines = ["# Configuration reference", "",
             "Every config group of `python -m trainer`, every option and every key, generated from `configs/` "
             "and the typed Trainer schema when this site was built (`python docs/make_config_reference.py` "
             "prints it). Choose an option with `group=option`, set a key with `group.key=value`; "
             "[the Hydra cookbook](../guides/hydra.md) shows both.", ""]
    lines += root_keys() + [""] + trainer_group() + [""]
    for group in groups():
        lines += [f"## `{group}`", ""]
        options = sorted((CONFIGS / group).glob("*.yaml"))
        lines += ["Options: " + ", ".join(f"`{p.stem}`" for p in options) + ".", ""]
        for path in options:
            lines += option_section(group, path)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
