"""Lightning's whole surface in the zero-edit mode: every module path imports (under ``lightning.*``,
``pytorch_lightning.*`` and ``lightning_fabric.*``), every name a Lightning module defines resolves, every public
signature matches Lightning's, except the allowed exceptions docs/lightning_api.md lists with their reasons.

The surface is the data file walked from Lightning 2.6.6 (``trainer/lightning_compat/surface/``); with that
Lightning installed, the walk is redone here and must give the file unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need_mark
from trainer.lightning_compat import surface
from trainer.lightning_compat.surface.exceptions import ALLOWED

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "lightning_api.md"


def _python(code: str, timeout: float = 120) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def report() -> dict:
    """The zero-edit mode's findings, from a fresh interpreter (no real Lightning imported)."""
    return json.loads(_python("import sys; sys.argv.append('--json'); "
                              "from trainer.lightning_compat.surface.check import main; main()"))


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_lightning_api", ROOT / "docs" / "make_lightning_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_lightning_module_imports_under_every_root(report):
    assert report["modules"] == 2 * len(surface.modules()) == 508
    assert report["modules_failed"] == {}


def test_every_finding_is_an_allowed_exception_and_every_exception_still_holds(report):
    covered, uncovered = _generator().classify(report)
    assert not uncovered, "\n".join(uncovered)
    assert all(covered.values()), [ALLOWED[i].patterns for i, keys in covered.items() if not keys]


def test_the_page_is_what_the_generator_writes(report):
    assert _generator().page(report) == PAGE.read_text(), \
        "regenerate: python docs/make_lightning_api.py > docs/lightning_api.md"


def test_names_not_served_fail_when_used_naming_themselves(report):
    """The module imports; the name raises LightningAttributeError (so ``from ... import`` an ImportError) that names
    it and the page listing why."""
    for key, error in report["names_failed"].items():
        module, name = key.split(":")
        assert error.startswith(f"LightningAttributeError: {module}.{name} is not provided by Relay") \
            and "docs/lightning_api.md" in error, (key, error)


def test_hardware_and_package_bound_pieces_as_lightning_without_their_dependency(report):
    """XLA, bitsandbytes and TransformerEngine are not installed here: the classes exist, the checks say no, and
    constructing one raises what Lightning raises (the values compared with Lightning's in the walk test)."""
    probes = report["probes"]
    assert probes["lightning.fabric.accelerators.xla:XLAAccelerator.is_available"] is False
    assert probes["lightning.fabric.accelerators.xla:XLAAccelerator.auto_device_count"] == 0
    assert probes["lightning.fabric.plugins.precision.bitsandbytes:_BITSANDBYTES_AVAILABLE"] is False
    assert probes["lightning.pytorch.plugins.precision.bitsandbytes:BitsandbytesPrecision"] == [
        "ModuleNotFoundError", "Requirement 'bitsandbytes' not met. HINT: Try running `pip install -U 'bitsandbytes'`"]
    assert probes["lightning.fabric.strategies.xla:XLAStrategy"][0] == "ModuleNotFoundError"
    assert "torch_xla" in probes["lightning.fabric.strategies.xla:XLAStrategy"][1]


@need_mark("lightning", "the data file is checked against the installed Lightning")
def test_the_data_file_is_the_walk_of_the_installed_lightning(report):
    import importlib.metadata

    if importlib.metadata.version("lightning") != surface.VERSION:
        pytest.skip(f"the data file is Lightning {surface.VERSION}'s")
    walked, probes = _python("import json, sys; from trainer.lightning_compat.surface import probes, walk; "
                             "sys.stdout.write(walk.dumps(walk.walk())); print(json.dumps(probes.run()))",
                             timeout=300).rsplit("\n", 2)[:2]
    assert walked + "\n" == Path(surface.DATA).read_text(), "rewrite it: python docs/make_lightning_api.py --walk"
    assert json.loads(probes) == report["probes"]  # the pieces bound to hardware or packages: as Lightning's
