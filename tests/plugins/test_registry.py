"""The plugin registry: built-in names, lazy loading, errors, and third-party entry points installed for real."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plugins.builtin import ACCELERATORS, ENVIRONMENTS, PRECISION, STRATEGIES
from plugins.registry import Registry, UnknownPluginError, default_registry


def test_every_builtin_is_registered_and_loads():
    registry = default_registry()
    for kind, table in (("accelerator", ACCELERATORS), ("strategy", STRATEGIES), ("precision", PRECISION),
                        ("environment", ENVIRONMENTS)):
        assert set(table) <= set(registry.names(kind))
        for name in table:
            cls = registry.get(kind, name).load()
            assert isinstance(cls, type), (kind, name)


def test_one_class_under_several_names_with_defaults():
    registry = default_registry()
    bf16, fp16 = registry.create("precision", "bf16-mixed"), registry.create("precision", "16-mixed")
    assert type(bf16) is type(fp16) and bf16.name == "bf16-mixed" and fp16.name == "16-mixed"


def test_unknown_name_lists_close_matches_and_all_names():
    with pytest.raises(UnknownPluginError) as err:
        default_registry().get("accelerator", "cdua", "accelerator")
    message = str(err.value)
    assert "Did you mean 'cuda'" in message and "cpu, cuda, mps, rocm, xpu" in message


def test_registering_a_taken_name_is_an_error():
    registry = Registry(load_entry_points=False)
    registry.register("strategy", "mine", "plugins.strategies.single_device:SingleDeviceStrategy")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("strategy", "mine", "plugins.strategies.single_device:SingleDeviceStrategy")


def test_names_import_nothing_until_used():
    code = (
        "import sys; from plugins.registry import default_registry; r = default_registry();"
        "r.names('accelerator'); r.names('strategy');"
        "print('plugins.accelerators.xpu' in sys.modules, 'plugins.environments.slurm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_plugins_command_lists_every_builtin():
    out = subprocess.run([sys.executable, "-m", "trainer", "plugins"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for name in [*ACCELERATORS, *STRATEGIES, *PRECISION, *ENVIRONMENTS]:
        assert f"  {name} " in out.stdout, name


THIRD_PARTY = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "relay-plugin-example"
        version = "0.0.1"

        [project.entry-points."relaytrain.accelerators"]
        fancy = "relay_plugin_example:FancyAccelerator"

        [project.entry-points."relaytrain.strategies"]
        register_many = "relay_plugin_example:register"

        [project.entry-points."relaytrain.precision"]
        fancy-precision = "relay_plugin_example:FancyPrecision"

        [project.entry-points."relaytrain.environments"]
        fancy_env = "relay_plugin_example:FancyEnvironment"
    """,
    "relay_plugin_example/__init__.py": '''
        """A third-party package adding Relay plugins through entry points only."""
        from plugins.accelerators.cpu import CPUAccelerator
        from plugins.environments.local import LocalEnvironment
        from plugins.precision.base import Precision
        from plugins.strategies.single_device import SingleDeviceStrategy


        class FancyAccelerator(CPUAccelerator):
            """A CPU under another name, from a third-party package."""

            name = "fancy"


        class FancyStrategy(SingleDeviceStrategy):
            """One process, registered by a function."""


        class FancyPrecision(Precision):
            """Full precision that counts its backward passes."""

            name = "fancy-precision"

            def __init__(self):
                self.backward_calls = 0

            def backward(self, loss, *args, **kwargs):
                self.backward_calls += 1
                super().backward(loss, *args, **kwargs)


        class FancyEnvironment(LocalEnvironment):
            """A cluster environment from a third-party package (here: this machine, under another name)."""

            name = "fancy_env"


        def register(registry):
            registry.register("strategy", "fancy_single", FancyStrategy, source="relay-plugin-example")
            registry.register("strategy", "fancy_single_cpu", FancyStrategy, "Same, pinned to the CPU",
                              source="relay-plugin-example", device="cpu")
    ''',
}


@pytest.mark.timeout(300)
def test_third_party_plugins_from_a_really_installed_distribution(tmp_path):
    """Build and install a small distribution (into a target dir on PYTHONPATH), then use its plugins."""
    src = tmp_path / "src"
    for name, text in THIRD_PARTY.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
         str(target), str(src)],
        check=True, capture_output=True, text=True,
    )
    assert list(target.glob("relay_plugin_example-0.0.1.dist-info/entry_points.txt"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    code = textwrap.dedent("""
        from trainer import Trainer
        from tests.helpers import Regression, loader, quiet
        trainer = Trainer(accelerator="fancy", strategy="fancy_single_cpu", **quiet(max_steps=2))
        assert type(trainer.accelerator).__name__ == "FancyAccelerator", trainer.accelerator
        assert type(trainer.strategy).__name__ == "FancyStrategy"
        trainer.fit(Regression(), loader())
        assert trainer.global_step == 2

        # docs/concepts.md, "Plugins": "A third-party package adds plugins without touching Relay, through entry points in
        # the groups `relaytrain.accelerators`, `relaytrain.strategies`, `relaytrain.precision` and
        # `relaytrain.environments`." The precision and the environment, selected by their entry point names:
        from plugins.registry import default_registry
        from plugins.selection import resolve_plugins

        strategy = resolve_plugins("cpu", 1, 1, "single_device", "fancy-precision", environment="fancy_env")
        assert type(strategy.precision).__name__ == "FancyPrecision", strategy.precision
        assert type(strategy.environment).__name__ == "FancyEnvironment", strategy.environment
        environment = default_registry().create("environment", "fancy_env")
        trainer = Trainer(accelerator="cpu", precision="fancy-precision", plugins=environment, **quiet(max_steps=3))
        assert trainer.precision == "fancy-precision" and trainer.strategy.environment is environment
        trainer.fit(Regression(), loader())
        assert trainer.global_step == 3 and trainer.precision_plugin.backward_calls == 3  # it ran every step
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert run.returncode == 0, run.stderr
    listing = subprocess.run([sys.executable, "-m", "trainer", "plugins"], capture_output=True, text=True, env=env,
                             timeout=60)
    assert "fancy" in listing.stdout and "[relay-plugin-example]" in listing.stdout
    assert "Same, pinned to the CPU" in listing.stdout
    listed: dict[str, list[str]] = {}
    for line in listing.stdout.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            kind = listed.setdefault(line[:-1], [])
        elif line.strip():
            kind.append(line.split()[0])
    assert "fancy-precision" in listed["precision"] and "fancy_env" in listed["environment"]


def test_an_unknown_strategy_argument_names_the_valid_ones_and_an_override_for_every_strategy():
    """Every registered strategy class: an unknown keyword is one clear line (the class, the bad keyword, every
    valid argument, a config override that works), not Python's "__init__() got an unexpected keyword" from a base."""
    import inspect

    from plugins.strategies.base import constructor_arguments

    registry = default_registry()
    classes = {registry.get("strategy", name).load() for name in STRATEGIES}
    assert len(classes) >= 8
    for cls in classes:
        with pytest.raises(TypeError) as err:
            cls(nonsense=1)
        message = str(err.value)
        assert "\n" not in message and "unexpected keyword" not in message
        assert message.startswith(f"{cls.__name__}(nonsense=1): unknown argument 'nonsense'."), message
        valid = constructor_arguments(cls)
        own = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
        assert set(own) <= set(valid) and f"Valid: {', '.join(valid)};" in message
        key, value = message.rsplit("e.g. strategy.", 1)[1].split("=", 1)
        assert key in valid and key not in ("accelerator", "precision")
        import yaml

        cls(**{key: yaml.safe_load(value)})  # the suggested override works
    with pytest.raises(TypeError, match=r"DDPStrategy\(timout=5\): unknown argument 'timout'. Did you mean 'timeout'\?"
                                        r".*e\.g\. strategy\.timeout=300"):
        registry.create("strategy", "ddp", timout=5)


def test_an_unknown_strategy_argument_through_the_cli_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "trainer", "strategy=fsdp", "+strategy.nonsense=1"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
    assert "FSDPStrategy(nonsense=1): unknown argument 'nonsense'" in run.stderr
    assert "sharding_strategy" in run.stderr and "Traceback" not in run.stderr
