"""benchmarks/lightning_conformance.py without a Lightning checkout: its selection rules and its report."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "lightning_conformance.py"


@pytest.fixture(scope="module")
def lc():
    spec = importlib.util.spec_from_file_location("lightning_conformance_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake(lc, source: str, marks=(), fixtures=(), names=(), private=()):
    test = object.__new__(lc.Test)
    test.nodeid, test.marks, test.fixtures, test.source = "t.py::t", list(marks), set(fixtures), source
    test.lightning_names, test.private_names = set(names), set(private)
    return test


def test_each_rule_and_what_it_lets_through(lc):
    assert lc.rule_for(fake(lc, "def t(): pass", marks=[("skipif", {"min_cuda_gpus": 1})])) == "hardware"
    assert lc.rule_for(fake(lc, "def t(): pass", marks=[("skipif", {"mps": False})])) is None
    assert lc.rule_for(fake(lc, 'def t():\n    with mock.patch("lightning.pytorch.trainer.x"): pass')) == \
        "patches-lightning"
    assert lc.rule_for(fake(lc, "def t(m):\n    m.setattr(Trainer, 'fit', 1)\n    monkeypatch.setattr(Trainer, 'x', 1)",
                            names={"Trainer"})) == "patches-lightning"
    assert lc.rule_for(fake(lc, "def t(cuda_count_2): pass", fixtures={"cuda_count_2"})) == "patches-lightning"
    assert lc.rule_for(fake(lc, "def t():\n    _Helper()", private={"_Helper"})) == "private-names"
    assert lc.rule_for(fake(lc, "def t(trainer):\n    trainer._checkpoint_connector.x")) == "private-members"
    assert lc.rule_for(fake(lc, "def t(self):\n    self._x = torch._C\n    s = '._private in a string'")) is None


def test_the_report_counts_what_passes_on_both_and_groups_failures(lc, tmp_path, capsys):
    def write(name, records):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    sel = [{"kind": "selection", "nodeid": f"tests_pytorch/test_a.py::t{i}", "rule": None} for i in range(4)]
    write("lightning", sel + [{"kind": "selection", "nodeid": "tests_pytorch/test_a.py::gpu", "rule": "hardware"}] + [
        {"kind": "test", "nodeid": f"tests_pytorch/test_a.py::t{i}", "outcome": "passed" if i < 3 else "failed",
         "error": None, "seconds": 0.1} for i in range(4)])
    write("relay", [{"kind": "test", "nodeid": "tests_pytorch/test_a.py::t0", "outcome": "passed", "error": None},
                    {"kind": "test", "nodeid": "tests_pytorch/test_a.py::t1", "outcome": "failed",
                     "error": "[call] AssertionError: at 0x7f00aa in /tmp/pytest-of-x/1"},
                    {"kind": "test", "nodeid": "tests_pytorch/test_a.py::t2", "outcome": "failed",
                     "error": "[call] AssertionError: at 0x7f00bb in /tmp/pytest-of-y/2"}])
    totals = lc.report(tmp_path, top=5, show_tests=1)
    assert totals["lightning_passes"] == 3 and totals["relay_passes"] == 1 and totals["selected"] == 4
    out = capsys.readouterr().out
    assert "   2  AssertionError: at 0x… in /tmp/…" in out  # one cause: addresses and temporary paths normalised
