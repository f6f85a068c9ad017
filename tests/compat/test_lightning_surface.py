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

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "lightning_api.md"


def _start(code: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _output(process: subprocess.Popen, timeout: float = 300) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return out


def _lightning_to_walk() -> bool:
    import importlib.metadata

    try:
        return importlib.metadata.version("lightning") == surface.VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.fixture(scope="module")
def processes() -> dict[str, subprocess.Popen]:
    """Both interpreters at once (the zero-edit check, and the walk of the installed Lightning when it is the
    release the data file was made from): each costs a few seconds of imports."""
    started = {"check": _start("import sys; sys.argv.append('--json'); "
                               "from trainer.lightning_compat.surface.check import main; main()")}
    if _lightning_to_walk():
        started["walk"] = _start("import json, sys; from trainer.lightning_compat.surface import probes, walk; "
                                 "sys.stdout.write(walk.dumps(walk.walk())); print(json.dumps(probes.run()))")
    yield started
    for process in started.values():
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.fixture(scope="module")
def report(processes) -> dict:
    """The zero-edit mode's findings, from a fresh interpreter (no real Lightning imported)."""
    return json.loads(_output(processes["check"]))


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_lightning_api", ROOT / "docs" / "make_lightning_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_lightning_module_imports_under_every_root(report):
    paths = len(surface.modules()) + len(surface.load()["module_aliases"])  # 261 files, 16 graveyard paths
    assert report["modules"] == 2 * paths == 554
    assert report["modules_failed"] == {}


def test_every_finding_is_an_allowed_exception_and_every_exception_still_holds(report):
    generator = _generator()
    covered, uncovered = generator.classify(report)
    assert not uncovered, "\n".join(uncovered)
    assert not generator.stale_patterns(covered), "remove these patterns from surface/exceptions.py"


def test_the_page_is_what_the_generator_writes(report):
    assert _generator().page(report) == PAGE.read_text(), \
        "regenerate: python docs/make_lightning_api.py > docs/lightning_api.md"


def test_every_constructor_argument_of_lightnings_plugin_classes_is_accepted(report):
    """``DDPStrategy(start_method=...)``, ``SLURMEnvironment(auto_requeue=...)``... (trainer/lightning_compat/surface/
    arguments.py): each argument, given its Lightning default, is not refused."""
    assert report["arguments_refused"] == {}


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
    assert probes["lightning.fabric.accelerators:TPUAccelerator.is_available"] is False  # Lightning's legacy name
    assert probes["lightning.fabric.plugins.precision.bitsandbytes:_BITSANDBYTES_AVAILABLE"] is False
    assert probes["lightning.pytorch.plugins.precision.bitsandbytes:BitsandbytesPrecision"] == [
        "ModuleNotFoundError", "Requirement 'bitsandbytes' not met. HINT: Try running `pip install -U 'bitsandbytes'`"]
    assert probes["lightning.fabric.strategies.xla:XLAStrategy"][0] == "ModuleNotFoundError"
    assert "torch_xla" in probes["lightning.fabric.strategies.xla:XLAStrategy"][1]


@need_mark("lightning", "the data file is checked against the installed Lightning")
def test_the_data_file_is_the_walk_of_the_installed_lightning(processes, report):
    if "walk" not in processes:
        pytest.skip(f"the data file is Lightning {surface.VERSION}'s")
    walked, probes = _output(processes["walk"]).rsplit("\n", 2)[:2]
    if json.loads(walked)["python"] == surface.load()["python"]:
        assert walked + "\n" == Path(surface.DATA).read_text(), "rewrite it: python docs/make_lightning_api.py --walk"
    else:  # another Python may write some defaults and expressions differently: the modules and names must agree
        names = lambda data: {m: sorted(spec["names"]) for m, spec in data["modules"].items()}  # noqa: E731
        assert names(json.loads(walked)) == names(surface.load())
    assert json.loads(probes) == report["probes"]  # the pieces bound to hardware or packages: as Lightning's
