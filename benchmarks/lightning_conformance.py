#!/usr/bin/env python
"""Lightning's own test suite as the behaviour reference for Relay's zero-edit mode.

Runs ``tests/tests_pytorch`` and ``tests/tests_fabric`` of a Lightning source checkout twice with the same
command line: once on the installed Lightning, once through Relay's zero-edit mode (the two environment
variables ``python -m trainer.lightning_compat`` sets: ``RELAY_LIGHTNING_COMPAT=1`` and Relay's ``boot``
folder first on ``PYTHONPATH``, whose ``sitecustomize`` calls ``trainer.lightning_compat.install()`` in pytest
and in every process it starts). It then prints, per test file and in total, how many of the selected tests
that pass on Lightning also pass on Relay, and Relay's failures grouped by their first error line.

  python benchmarks/lightning_conformance.py --lightning-src /work/lightning-src            # both runs + report
  python benchmarks/lightning_conformance.py --lightning-src SRC --files tests_pytorch/callbacks/test_lr_monitor.py
  python benchmarks/lightning_conformance.py --lightning-src SRC --report-only              # re-read the results
  python benchmarks/lightning_conformance.py --lightning-src SRC --frameworks relay         # rerun one side

``SRC`` is a checkout of Lightning's repository (only its ``tests/`` folder is used) at the tag of the installed
release or the one before it (2.6.5's tests fit 2.6.6). Nothing from it is copied anywhere.

The harness, the same on both sides (it is this file, loaded into pytest with ``-p lightning_conformance``):
- pytest runs with ``--noconftest``, ``-p no:cacheprovider``, xdist off and a timeout per test. Lightning's
  own ``conftest.py`` files import private modules of Lightning (``_SignalConnector``, ``_ChildProcessObserver``)
  to reset global state between tests; the fixtures below do the same resets with public means only
  (environment, signal handlers, ``rank_zero_only.rank``, the default process group, deterministic mode).
  ``tests_pytorch/loggers/conftest.py`` only fakes third-party logger packages, so it is loaded as it is.
- ``tests_*/helpers/runif.py`` imports Lightning's private ``_runif_reasons``; ``RunIf`` is replaced by one
  written here that checks the same requirements on this machine with torch and ``importlib`` and keeps its
  arguments on the ``skipif`` mark, as Lightning's does (the rules below read them).
- Each top-level test folder runs in its own pytest process (a crash loses one folder, not the run), with
  ``--continue-on-collection-errors``: a file that does not import fails its own tests only.
- Outcomes are written as JSON lines by the hooks at the bottom of this file: one line per test (passed,
  failed, skipped; the first error line) and one per file that fails to import.

Selection (``RULES``): a test is left out by the first rule that matches it, on both sides alike, computed
from its marks and its source text; the report counts what each rule leaves out. What is compared is the
selected tests that pass on Lightning: the figure is how many of those pass on Relay.
"""

from __future__ import annotations

import argparse
import ast
import collections
import datetime
import importlib.util
import inspect
import json
import os
import platform
import re
import subprocess
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELAY_ROOT = HERE.parent
BOOT_DIR = RELAY_ROOT / "trainer" / "lightning_compat" / "boot"
SUITES = ("tests_pytorch", "tests_fabric")
FRAMEWORKS = ("lightning", "relay")
OUT_ENV = "LIGHTNING_CONFORMANCE_OUT"  # the JSON-lines file the pytest hooks append to

# --------------------------------------------------------------------------------------------------------
# Selection rules: (name, what it leaves out, predicate(test) -> bool). First match wins.
# --------------------------------------------------------------------------------------------------------

HARDWARE_KWARGS = ("min_cuda_gpus", "tpu", "bf16_cuda", "standalone")
# conftest fixtures that work by patching Lightning's private modules (CUDA/MPS/XLA device counts)
PATCHING_FIXTURES = {"cuda_count_0", "cuda_count_1", "cuda_count_2", "cuda_count_4", "mps_count_0", "mps_count_1",
                     "xla_available", "tpu_available"}
PATCHING_HELPERS = re.compile(r"\bmock_(cuda_count|mps_count|xla_available|tpu_available)\(")
LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
_PATCH_CALL = re.compile(
    r"\b(?:mock\.patch|patch|monkeypatch\.setattr|monkeypatch\.delattr|monkeypatch\.setitem)"
    r"(?:\.object|\.dict|\.multiple)?\(\s*(?P<q>[\"']?)(?P<target>[\w.]+)")
# `obj._private` where obj is not the test's own object, nor a module of torch / Python
_PRIVATE_ATTR = re.compile(r"(?<![\w.])(?!(?:self|cls|torch|os|sys|np|mock|threading|inspect|typing|pytest|"
                           r"signal|subprocess|multiprocessing|mp|tempfile|collections|functools|warnings|"
                           r"logging|importlib|pickle|weakref|builtins|gc|abc|enum|re|json|yaml|types)\b)"
                           r"(?P<obj>[A-Za-z]\w*(?:\.\w+)*)\._(?!_)[A-Za-z]\w*")


class Test:
    """What the rules look at: the node id, the marks' arguments, the fixtures and the source text."""

    def __init__(self, item) -> None:
        self.nodeid = item.nodeid
        self.marks = [(m.name, dict(m.kwargs)) for m in item.iter_markers()]
        self.fixtures = set(getattr(item, "fixturenames", ()))
        func = getattr(item, "function", None) or getattr(item, "obj", None)
        try:
            self.source = inspect.getsource(inspect.unwrap(func)) if func is not None else ""
        except (OSError, TypeError):
            self.source = ""
        module = getattr(item, "module", None)
        self.lightning_names, self.private_names = _lightning_imports(module)
        self.source += _helpers_source(module, self.source)

    def runif(self) -> dict:
        merged: dict = {}
        for name, kwargs in self.marks:
            if name == "skipif":
                merged.update(kwargs)
        return merged


_IMPORT_CACHE: dict[str, tuple[set[str], set[str]]] = {}


def _lightning_imports(module) -> tuple[set[str], set[str]]:
    """Names a test module binds from Lightning (all, and the private ones: ``_x`` or from a ``_x`` module)."""
    path = getattr(module, "__file__", None)
    if not path:
        return set(), set()
    if path not in _IMPORT_CACHE:
        names, private = set(), set()
        try:
            tree = ast.parse(Path(path).read_text())
        except (OSError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIGHTNING_ROOTS:
                private_module = any(part.startswith("_") for part in node.module.split("."))
                for alias in node.names:
                    bound = alias.asname or alias.name
                    names.add(bound)
                    if alias.name.startswith("_") and not alias.name.startswith("__") or private_module:
                        private.add(bound)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in LIGHTNING_ROOTS:
                        names.add((alias.asname or alias.name).split(".")[0])
        _IMPORT_CACHE[path] = (names, private)
    return _IMPORT_CACHE[path]


_DEFS_CACHE: dict[str, dict[str, str]] = {}


def _helpers_source(module, source: str) -> str:
    """The source of the test module's own functions and classes the test names, and those they name in turn: a
    test that reaches Lightning's internals through a helper of its file is judged by what the helper does."""
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    if path not in _DEFS_CACHE:
        try:
            text = Path(path).read_text()
            tree = ast.parse(text)
        except (OSError, SyntaxError):
            text, tree = "", ast.Module(body=[], type_ignores=[])
        _DEFS_CACHE[path] = {node.name: ast.get_source_segment(text, node) or "" for node in tree.body
                             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                             and not node.name.startswith("test_")}
    defs, seen, todo, out = _DEFS_CACHE[path], set(), [source], []
    while todo:
        for word in set(re.findall(r"\b[A-Za-z_]\w*\b", todo.pop())) & defs.keys() - seen:
            seen.add(word)
            out.append(defs[word])
            todo.append(defs[word])
    return "\n".join(out)


def _needs_hardware(t: Test) -> bool:
    runif = t.runif()
    return any(runif.get(k) for k in HARDWARE_KWARGS) or runif.get("mps") is True


def _patches_lightning(t: Test) -> bool:
    if t.fixtures & PATCHING_FIXTURES or PATCHING_HELPERS.search(t.source):
        return True
    for m in _PATCH_CALL.finditer(t.source):
        root = m.group("target").split(".")[0]
        if m.group("q") and root in LIGHTNING_ROOTS:
            return True  # mock.patch("lightning.pytorch....")
        if not m.group("q") and root in t.lightning_names | set(LIGHTNING_ROOTS):
            return True  # mock.patch.object(Trainer, ...), monkeypatch.setattr(lightning.fabric.x, ...)
    return False


def _uses_private_names(t: Test) -> bool:
    if re.search(r"\b(?:from|import)\s+(?:lightning|pytorch_lightning|lightning_fabric)[\w.]*\._", t.source):
        return True
    if re.search(r"import\s+_[A-Za-z]", t.source) and re.search(r"from\s+(?:lightning|pytorch_lightning|"
                                                                   r"lightning_fabric)\b", t.source):
        return True
    return any(re.search(rf"\b{re.escape(name)}\b", t.source) for name in t.private_names)


# `self.trainer._x` in a test's own module or callback: the Trainer's (or Fabric's) internals all the same
_PRIVATE_VIA_SELF = re.compile(r"(?<![\w.])(?:self|cls)\.(?:trainer|fabric|strategy|accelerator|lightning_module|"
                               r"precision_plugin|_trainer|_fabric)(?:\.\w+)*\._(?!_)[A-Za-z]\w*")


def _reads_private_members(t: Test) -> bool:
    body = _strip_strings_and_comments(t.source)
    return _PRIVATE_ATTR.search(body) is not None or _PRIVATE_VIA_SELF.search(body) is not None


def _strip_strings_and_comments(source: str) -> str:
    source = re.sub(r"#[^\n]*", "", source)
    return re.sub(r"(\"\"\"|''')(?:.|\n)*?\1|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", "''", source)


RULES = [
    ("hardware", "marked RunIf(min_cuda_gpus / tpu / mps=True / bf16_cuda / standalone): needs hardware or a "
                 "separate process per test, not this machine", _needs_hardware),
    ("patches-lightning", "patches Lightning's own modules or objects (mock.patch(\"lightning....\"), "
                          "patch.object(<a Lightning name>, ...), monkeypatch of a Lightning module, or the "
                          "conftest's CUDA/MPS/XLA device-count fixtures, which patch private modules)",
     _patches_lightning),
    ("private-names", "uses a private Lightning name: `_X` imported from a Lightning module, or anything from a "
                      "private Lightning module (`lightning.x._y`)", _uses_private_names),
    ("private-members", "reads or writes a private member of an object it did not define (`trainer._x`, "
                        "`fabric._strategy`, `loop._data_fetcher`): a test of Lightning's internals",
     _reads_private_members),
]


def rule_for(t: Test) -> str | None:
    for name, _, predicate in RULES:
        if predicate(t):
            return name
    return None


# --------------------------------------------------------------------------------------------------------
# RunIf, written here: the requirements Lightning's RunIf names, checked on this machine.
# --------------------------------------------------------------------------------------------------------

_PACKAGES = {"deepspeed": "deepspeed", "rich": "rich", "omegaconf": "omegaconf", "psutil": "psutil",
             "sklearn": "sklearn", "onnx": "onnx", "onnxscript": "onnxscript", "tensorrt": "torch_tensorrt"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3])


def runif_reasons(**kwargs) -> list[str]:
    import torch

    reasons = []
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if kwargs.get("min_cuda_gpus") and gpus < kwargs["min_cuda_gpus"]:
        reasons.append(f"GPUs>={kwargs['min_cuda_gpus']}")
    if kwargs.get("bf16_cuda") and not (gpus and torch.cuda.is_bf16_supported()):
        reasons.append("CUDA device bf16")
    if kwargs.get("min_torch") and _version(torch.__version__) < _version(kwargs["min_torch"]):
        reasons.append(f"torch>={kwargs['min_torch']}")
    if kwargs.get("max_torch") and _version(torch.__version__) >= _version(kwargs["max_torch"]):
        reasons.append(f"torch<{kwargs['max_torch']}")
    if kwargs.get("min_python") and sys.version_info[:3] < _version(kwargs["min_python"]):
        reasons.append(f"python>={kwargs['min_python']}")
    if kwargs.get("tpu"):
        reasons.append("TPU")
    if kwargs.get("mps") is True:
        reasons.append("MPS")
    if (kwargs.get("skip_windows") and sys.platform == "win32") or (kwargs.get("linux_only")
                                                                      and sys.platform != "linux"):
        reasons.append("platform")
    if kwargs.get("standalone") and os.getenv("PL_RUN_STANDALONE_TESTS", "0") != "1":
        reasons.append("standalone")
    if kwargs.get("dynamo") and (sys.platform == "win32" or not hasattr(torch, "compile")):
        reasons.append("torch.dynamo")
    for key, package in _PACKAGES.items():
        if kwargs.get(key) and importlib.util.find_spec(package) is None:
            reasons.append(package)
    return reasons


def RunIf(**kwargs):  # noqa: N802 - the name the test files import
    import pytest

    reasons = runif_reasons(**kwargs)
    return pytest.mark.skipif(condition=bool(reasons), reason=f"Requires: [{' + '.join(reasons)}]", **kwargs)


def _install_test_helpers() -> None:
    """Serve ``tests_*.helpers.runif`` and the conftest modules' helper functions from this file."""
    import pytest

    runif = types.ModuleType("runif")
    runif.RunIf = RunIf
    runif._xfail_gloo_windows = pytest.mark.xfail(RuntimeError, strict=True, condition=False, reason="windows")
    for suite in SUITES:
        sys.modules[f"{suite}.helpers.runif"] = runif
        stub = types.ModuleType(f"{suite}.conftest")

        def _left_out(*args, **kwargs):
            raise RuntimeError("a conftest helper that patches Lightning's private modules (left out by the rules)")

        for name in ("mock_cuda_count", "mock_mps_count", "mock_xla_available", "mock_tpu_available"):
            setattr(stub, name, _left_out)
        sys.modules[f"{suite}.conftest"] = stub


# --------------------------------------------------------------------------------------------------------
# The pytest side: fixtures, selection and outcome recording (active when pytest loads this module).
# --------------------------------------------------------------------------------------------------------

def _write(record: dict) -> None:
    path = os.environ.get(OUT_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def _first_error_line(report) -> str:
    """The first ``E`` line of a failure (the exception and its message), else the crash message."""
    text = str(report.longrepr) if report.longrepr is not None else ""
    for line in text.splitlines():
        if line.startswith("E  "):
            return line[1:].strip()
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    if crash:
        return crash.splitlines()[0]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(no message)"


def pytest_configure(config) -> None:
    _install_test_helpers()
    config.addinivalue_line("markers", "flaky: Lightning's marker for retried tests")
    suite_root = Path(str(config.rootpath))
    loggers_conftest = suite_root / "tests_pytorch" / "loggers" / "conftest.py"
    if loggers_conftest.exists() and not config.pluginmanager.has_plugin("lightning_loggers_fakes"):
        spec = importlib.util.spec_from_file_location("lightning_loggers_fakes", loggers_conftest)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        config.pluginmanager.register(module, "lightning_loggers_fakes")


def pytest_unconfigure(config) -> None:
    """Workers a timed-out multi-process test left behind would keep pytest from exiting: end them."""
    import multiprocessing

    for child in multiprocessing.active_children():
        child.kill()


def pytest_collection_modifyitems(session, config, items) -> None:
    keep, drop = [], []
    for item in items:
        rule = rule_for(Test(item))
        _write({"kind": "selection", "nodeid": item.nodeid, "rule": rule})
        (drop if rule else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_collectreport(report) -> None:
    if report.failed:
        _write({"kind": "collect", "nodeid": report.nodeid, "error": _first_error_line(report)})


_OUTCOMES: dict[str, dict] = {}


def pytest_runtest_logreport(report) -> None:
    rec = _OUTCOMES.setdefault(report.nodeid, {"kind": "test", "nodeid": report.nodeid, "outcome": "passed",
                                               "error": None, "seconds": 0.0})
    rec["seconds"] += report.duration
    if report.failed and rec["outcome"] != "failed":
        rec["outcome"], rec["error"] = "failed", f"[{report.when}] {_first_error_line(report)}"
    elif report.skipped and rec["outcome"] == "passed":
        rec["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    if report.when == "teardown":
        _write(_OUTCOMES.pop(report.nodeid))


def _pytest_fixtures():
    import pytest

    @pytest.fixture(autouse=True)
    def conformance_restore_state():
        """Undo what a test leaves behind in the process: environment, signal handlers, rank, process group."""
        import signal

        import torch

        env = dict(os.environ)
        handlers = {s: signal.getsignal(s) for s in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}}
        ranks = {}
        for name in ("lightning_utilities.core.rank_zero", "lightning.fabric.utilities.rank_zero",
                     "lightning.pytorch.utilities.rank_zero"):
            module = sys.modules.get(name)
            fn = getattr(module, "rank_zero_only", None) if module is not None else None
            if fn is not None:
                ranks[name] = (fn, getattr(fn, "rank", None))
        yield
        os.environ.clear()
        os.environ.update(env)
        for s, h in handlers.items():
            try:
                if h is not None:
                    signal.signal(s, h)
            except (ValueError, TypeError):
                pass
        for fn, rank in ranks.values():
            if rank is not None:
                fn.rank = rank
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        torch.use_deterministic_algorithms(False)

    @pytest.fixture(scope="session")
    def datadir():
        return Path(os.environ.get("LIGHTNING_CONFORMANCE_SRC", ".")) / "tests" / "tests_pytorch" / "data"

    @pytest.fixture
    def caplog(caplog):
        """Let Lightning's loggers reach pytest's capture (they do not propagate by default)."""
        import logging

        names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in LIGHTNING_ROOTS]
        saved = {n: logging.getLogger(n).propagate for n in names}
        for n in names:
            logging.getLogger(n).propagate = True
        yield caplog
        for n, value in saved.items():
            logging.getLogger(n).propagate = value

    @pytest.fixture
    def tmpdir_server(tmp_path):
        """An HTTP server serving ``tmp_path``: (host, port)."""
        import threading
        from functools import partial
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        server = ThreadingHTTPServer(("localhost", 0), partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server.server_address
        server.shutdown()

    @pytest.fixture
    def single_process_pg():
        """A one-process gloo group for the test."""
        import tempfile

        import torch.distributed as dist

        with tempfile.TemporaryDirectory() as folder:
            dist.init_process_group("gloo", init_method=f"file://{folder}/pg", rank=0, world_size=1)
            try:
                yield
            finally:
                if dist.is_initialized():
                    dist.destroy_process_group()

    return conformance_restore_state, datadir, caplog, tmpdir_server, single_process_pg


if "pytest" in sys.modules and __name__ != "__main__":
    (conformance_restore_state, datadir, caplog, tmpdir_server, single_process_pg) = _pytest_fixtures()


# --------------------------------------------------------------------------------------------------------
# The driver: run both sides, read the records back, print the comparison.
# --------------------------------------------------------------------------------------------------------

def test_files(tests_root: Path) -> list[str]:
    return sorted(str(p.relative_to(tests_root)) for suite in SUITES for p in (tests_root / suite).rglob("test_*.py")
                  if "helpers" not in p.parts)


def sampled(tests_root: Path, every: int) -> list[str]:
    """Every ``every``-th test file of both suites (sorted by path, starting with the first): a fixed sample."""
    return test_files(tests_root)[::every]


def chunks(tests_root: Path, files: list[str] | None) -> list[list[str]]:
    """The pytest invocations: the given files grouped by their top-level folder, else one per top-level folder
    (and one for the loose files) of each suite."""
    if files:
        groups: dict[str, list[str]] = {}
        for f in files:
            parts = Path(f).parts
            groups.setdefault("/".join(parts[:2]) if len(parts) > 2 else parts[0], []).append(f)
        return list(groups.values())
    out = []
    for suite in SUITES:
        root = tests_root / suite
        loose = sorted(str(p.relative_to(tests_root)) for p in root.glob("test_*.py"))
        if loose:
            out.append(loose)
        for sub in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in ("helpers", "__pycache__")):
            if any(sub.rglob("test_*.py")):
                out.append([str(sub.relative_to(tests_root))])
    return out


def run_side(framework: str, src: Path, out: Path, files: list[str] | None, timeout: int) -> float:
    tests_root = src / "tests"
    records = out / f"{framework}.jsonl"
    records.unlink(missing_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
               LIGHTNING_CONFORMANCE_SRC=str(src), **{OUT_ENV: str(records)})
    env.pop("RELAY_LIGHTNING_COMPAT", None)
    path = [str(HERE)]
    if framework == "relay":
        env["RELAY_LIGHTNING_COMPAT"] = "1"
        path = [str(BOOT_DIR), str(RELAY_ROOT), *path]
    env["PYTHONPATH"] = os.pathsep.join(path)
    started = time.perf_counter()
    for chunk in chunks(tests_root, files):
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p",
               "no:randomly", "--noconftest", "--continue-on-collection-errors", "-p", "lightning_conformance", f"--timeout={timeout}",
               "--rootdir", str(tests_root), "-o", "addopts=", *chunk]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tests_root, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True)
        tail = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"[{framework}] {' '.join(chunk)[:70]:70s} {time.perf_counter() - t0:7.1f}s  rc={proc.returncode} "
              f"{tail[:90]}", flush=True)
        if proc.returncode not in (0, 1, 2, 5):  # 2: a file failed to import (recorded); 5: nothing selected
            _append(records, {"kind": "crash", "nodeid": " ".join(chunk), "rc": proc.returncode,
                              "error": (proc.stderr.strip().splitlines() or [tail])[-1]})
    return time.perf_counter() - started


def _append(path: Path, record: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def read(out: Path, framework: str) -> dict:
    tests, selection, collect, crashes = {}, {}, {}, []
    path = out / f"{framework}.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["kind"] == "test":
                tests[rec["nodeid"]] = rec
            elif rec["kind"] == "selection":
                selection[rec["nodeid"]] = rec["rule"]
            elif rec["kind"] == "collect":
                collect[rec["nodeid"]] = rec["error"]
            elif rec["kind"] == "crash":
                crashes.append(rec)
    return {"tests": tests, "selection": selection, "collect": collect, "crashes": crashes}


_NORMALISE = [(re.compile(r"0x[0-9a-f]+"), "0x…"), (re.compile(r"/tmp/\S+"), "/tmp/…"),
              (re.compile(r"pytest-of-\S+"), "pytest-…"), (re.compile(r"\b\d+\.\d{3,}\b"), "<float>")]


def cause(error: str) -> str:
    error = re.sub(r"^\[(setup|call|teardown)\] ", "", error or "(no message)")
    for pattern, repl in _NORMALISE:
        error = pattern.sub(repl, error)
    return error[:160]


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def compare(out: Path) -> dict:
    light, relay = read(out, "lightning"), read(out, "relay")
    # a selection recorded after the run (the rules changed since) narrows what was run
    reference = {n for n, r in light["tests"].items()
                 if r["outcome"] == "passed" and light["selection"].get(n) is None}
    per_file: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    failures: dict[str, list[str]] = collections.defaultdict(list)
    for nodeid in sorted(reference):
        f = file_of(nodeid)
        per_file[f][0] += 1
        rec = relay["tests"].get(nodeid)
        if rec is not None and rec["outcome"] == "passed":
            per_file[f][1] += 1
            continue
        if rec is not None:
            why = rec["error"] or f"({rec['outcome']} on Relay)"
        elif f in relay["collect"]:
            why = "[collect] " + relay["collect"][f]
        elif nodeid in relay["selection"] or not relay["tests"]:
            why = "(not run on Relay)"
        else:
            why = "(not collected on Relay)"
        failures[cause(why)].append(nodeid)
    rules = collections.Counter(r for r in light["selection"].values())
    return {"lightning": light, "relay": relay, "reference": reference, "per_file": dict(per_file),
            "failures": failures, "rules": rules}


def report(out: Path, top: int, show_tests: int) -> dict:
    c = compare(out)
    light = c["lightning"]
    collected = len(light["selection"])
    selected = c["rules"].get(None, 0)
    outcomes = collections.Counter(r["outcome"] for r in light["tests"].values())
    print(f"\nCollected on Lightning: {collected} tests; left out by the rules: {collected - selected}; "
          f"selected: {selected}")
    for name, text, _ in RULES:
        print(f"  {c['rules'].get(name, 0):5d}  {name}: {text}")
    print("Selected tests on Lightning: " + ", ".join(f"{v} {k}" for k, v in sorted(outcomes.items())))
    if light["collect"]:
        print(f"Files that fail to import on Lightning (left out): {len(light['collect'])}")
    print("\nPer file (selected tests that pass on Lightning / of those, passing on Relay):")
    for f, (ref, ok) in sorted(c["per_file"].items()):
        print(f"  {ok:4d} / {ref:4d}  {'' if ok == ref else '!'} {f}")
    total_ref = len(c["reference"])
    total_ok = sum(ok for _, ok in c["per_file"].values())
    pct = 100.0 * total_ok / total_ref if total_ref else 0.0
    print(f"\nTOTAL: {total_ok} of {total_ref} tests that pass on Lightning pass on Relay ({pct:.1f}%)")
    print(f"\nFailures on Relay by first error line ({len(c['failures'])} causes), biggest first:")
    for why, nodes in sorted(c["failures"].items(), key=lambda kv: -len(kv[1]))[:top]:
        print(f"  {len(nodes):4d}  {why}")
        for n in nodes[:show_tests]:
            print(f"          {n}")
    for side in FRAMEWORKS:
        for crash in c[side]["crashes"]:
            print(f"[{side}] pytest crashed on {crash['nodeid']} (rc={crash['rc']}): {crash['error']}")
    return {"collected": collected, "selected": selected, "lightning_passes": total_ref, "relay_passes": total_ok,
            "percent": round(pct, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lightning-src", required=True, type=Path, help="a checkout of Lightning's repository")
    parser.add_argument("--out", type=Path, default=Path("/tmp/lightning_conformance"),
                        help="where the outcome records go (default: %(default)s)")
    parser.add_argument("--files", nargs="*", help="test files or folders relative to SRC/tests (default: all)")
    parser.add_argument("--every", type=int, default=1,
                        help="run every N-th test file only (sorted by path): a fixed sample (default: all files)")
    parser.add_argument("--frameworks", default="lightning,relay", help="which sides to run (default: both)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test (default: %(default)s)")
    parser.add_argument("--report-only", action="store_true", help="read the records of an earlier run")
    parser.add_argument("--top", type=int, default=40, help="failure causes shown")
    parser.add_argument("--show-tests", type=int, default=3, help="tests shown per cause")
    parser.add_argument("--json", type=Path, help="write the totals here")
    args = parser.parse_args(argv)
    src = args.lightning_src.resolve()
    if not (src / "tests" / "tests_pytorch").is_dir():
        parser.error(f"{src} has no tests/tests_pytorch: give a checkout of Lightning's repository")
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = {}
    if args.every > 1 and not args.files:
        args.files = sampled(src / "tests", args.every)
        print(f"sample: every {args.every}th test file, {len(args.files)} of {len(test_files(src / 'tests'))}")
    if not args.report_only:
        for framework in [f for f in args.frameworks.split(",") if f]:
            if framework not in FRAMEWORKS:
                parser.error(f"--frameworks: {framework!r} is not one of {FRAMEWORKS}")
            seconds[framework] = run_side(framework, src, args.out, args.files, args.timeout)
            print(f"[{framework}] done in {seconds[framework] / 60:.1f} min", flush=True)
    totals = report(args.out, args.top, args.show_tests)
    totals.update(seconds={k: round(v) for k, v in seconds.items()}, date=datetime.date.today().isoformat(),
                  machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                  lightning_src=str(src))
    if args.json:
        args.json.write_text(json.dumps(totals, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
