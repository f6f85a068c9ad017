"""``Trainer(plugins=...)`` takes a cluster environment by its registered name, a third party's (entry points) too."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainer import Trainer
from trainer.errors import MisconfigurationError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def test_a_builtin_environment_by_name(tmp_path):
    from plugins.environments.local import LocalEnvironment

    for given in ("local", ["local"]):
        trainer = Trainer(default_root_dir=tmp_path, logger=False, plugins=given)
        assert type(trainer.strategy.environment) is LocalEnvironment


def test_anything_else_is_one_clear_error(tmp_path):
    with pytest.raises(MisconfigurationError, match=r"Trainer\(plugins=42\) is not valid: .*ClusterEnvironment"):
        Trainer(default_root_dir=tmp_path, plugins=42)
    with pytest.raises(MisconfigurationError, match="one ClusterEnvironment"):
        Trainer(default_root_dir=tmp_path, plugins=["local", "slurm"])


def _install_environment_package(site: Path) -> None:
    """A distribution as pip leaves it (a package plus its dist-info with entry points), found by importlib.metadata."""
    (site / "relay_test_env").mkdir(parents=True)
    (site / "relay_test_env" / "__init__.py").write_text(textwrap.dedent('''
        from plugins.environments.local import LocalEnvironment


        class TestClusterEnvironment(LocalEnvironment):
            """This machine, under a third party's name."""

            name = "test_cluster"
    '''))
    info = site / "relay_test_env-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: relay-test-env\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[relaytrain.environments]\ntest_cluster = relay_test_env:TestClusterEnvironment\n")


def test_a_third_party_environment_registered_through_an_entry_point(tmp_path):
    site = tmp_path / "site"
    _install_environment_package(site)
    code = textwrap.dedent(f"""
        from trainer import Trainer
        trainer = Trainer(default_root_dir={str(tmp_path)!r}, logger=False, plugins="test_cluster")
        print("environment:", type(trainer.strategy.environment).__name__)
        try:
            Trainer(default_root_dir={str(tmp_path)!r}, plugins="test_clustr")
        except ValueError as err:  # UnknownPluginError, as for an unknown accelerator or strategy
            print("error:", err)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
                          timeout=100)
    assert done.returncode == 0, done.stderr
    assert "environment: TestClusterEnvironment" in done.stdout
    error = next(line for line in done.stdout.splitlines() if line.startswith("error:"))
    assert "Trainer(plugins='test_clustr')" in error and "Did you mean 'test_cluster'" in error
    assert "Valid names:" in error and "test_cluster" in error.split("Valid names:")[1] and "slurm" in error
