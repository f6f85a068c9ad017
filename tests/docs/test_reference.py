"""The reference pages: the configuration reference covers every config group, option and key, and the plugin
names the Concepts page lists are the ones the registry accepts."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("make_config_reference", ROOT / "docs" / "make_config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_names_every_group_option_and_key():
    from trainer.arguments.trainer_arguments import TrainerArguments, spec_of

    page = _generator().render()
    configs = ROOT / "configs"
    for group_dir in sorted(p for p in configs.iterdir() if p.is_dir() and p.name not in ("hydra", "__pycache__")):
        group = group_dir.name
        assert f"## `{group}`" in page, group
        if group == "trainer":
            continue
        for option in sorted(group_dir.glob("*.yaml")):
            assert f"### `{group}={option.stem}`" in page, (group, option.stem)
            node = yaml.safe_load(option.read_text())
            if not isinstance(node, dict) or "defaults" in node or "# @package _global_" in option.read_text():
                continue
            if len(node) == 1 and isinstance(next(iter(node.values())), dict):
                name, node = next(iter(node.items()))
                group = f"{group_dir.name}.{name}"
            for key in node:
                if not key.startswith("_"):
                    assert f"`{group}.{key}`" in page, (option, key)
            group = group_dir.name
    for field in TrainerArguments.__dataclass_fields__.values():
        if spec_of(field).group == "trainer":
            assert f"`trainer.{field.name}`" in page, field.name
    for key in yaml.safe_load((configs / "config.yaml").read_text()):
        if key not in ("defaults", "hydra"):
            assert f"| `{key}` |" in page, key


def test_the_concepts_plugins_table_lists_every_name_the_registry_accepts():
    """The "| kind | names |" table of docs/concepts.md against ``python -m trainer plugins``'s source."""
    from plugins.registry import default_registry, selection_names

    rows = dict(re.findall(r"^\| (accelerator|strategy|precision|environment) \| (.+) \|$",
                           (ROOT / "docs" / "concepts.md").read_text(), re.M))
    extra = selection_names()
    for kind in ("accelerator", "strategy", "precision", "environment"):
        listed = set(re.findall(r"`([^`]+)`", rows[kind]))
        want = set(default_registry().names(kind)) | set(extra.get(kind, {}))
        assert listed == want, f"docs/concepts.md plugins table, {kind}: missing {sorted(want - listed)}, " \
                               f"extra {sorted(listed - want)}"


def test_the_site_hook_drops_only_the_optional_pages_that_are_missing(tmp_path, monkeypatch):
    """mkdocs --strict fails on a nav entry without its page: pages other branches add are dropped until they exist;
    a page no entry names is added to the how-to guides."""
    spec = importlib.util.spec_from_file_location("site_hooks", ROOT / "docs" / "site_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    monkeypatch.setattr(hooks, "DOCS", tmp_path)
    (tmp_path / "healing.md").write_text("# Healing\n")
    nav = [{"Home": "index.md"}, {"Guides": [{"Healing": "healing.md"}, {"Large": "large_models_training.md"},
                                             {"Typo": "guides/strategy.md"}]}]
    assert hooks.on_config({"nav": nav})["nav"] == [
        {"Home": "index.md"}, {"Guides": [{"Healing": "healing.md"}, {"Typo": "guides/strategy.md"}]}]
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "new_topic.md").write_text("# A new topic\n")  # a page no nav entry names yet
    nav = [{"Home": "index.md"}, {"How-to guides": [{"Healing": "healing.md"}]}]
    assert hooks.on_config({"nav": nav})["nav"] == [
        {"Home": "index.md"}, {"How-to guides": [{"Healing": "healing.md"}, {"A new topic": "guides/new_topic.md"}]}]


def test_the_performance_charts_are_drawn_from_figures_the_page_gives(tmp_path):
    """benchmarks/plots.py draws every chart; each chart's figures carry the date and command the page shows."""
    pytest.importorskip("matplotlib")
    figures = json.loads((ROOT / "benchmarks" / "figures.json").read_text())
    page = (ROOT / "docs" / "performance.md").read_text()
    for name, entry in figures.items():
        assert entry["date"] in page and entry["command"].split(" --every")[0] in page, name
        assert f"](img/{name}.svg)" in page and (ROOT / "docs" / "img" / f"{name}.svg").is_file(), name
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plots.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{name}.svg" for name in figures)
