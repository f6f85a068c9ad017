#!/usr/bin/env python
"""Real Lightning projects' own test suites, run unmodified on Lightning and on Relay's zero-edit mode.

Each project is its source release from PyPI (the sdist, which carries its tests), installed without dependencies
into a virtual environment of its own that sees this interpreter's packages (torch, Lightning, Relay's extras)
after its own, where the project's pinned dependencies go. Its tests run twice, as a user runs them: on Lightning,
then with ``RELAY_LIGHTNING_COMPAT=1`` and Relay's ``boot`` folder first on ``PYTHONPATH`` (what
``python -m trainer.lightning_compat`` sets). The figure is how many of the tests that pass on Lightning pass on
Relay; Relay's failures are listed by first error line.

    python benchmarks/real_projects.py                       # every project below
    python benchmarks/real_projects.py --project litgpt --workdir /tmp/real-projects
    python benchmarks/real_projects.py --project chemprop --tests-source ~/src/chemprop   # a checkout of v2.3.1

Needs PyPI (the sdists and the pinned dependencies; for chemprop's tests, github.com or a checkout) and Lightning
installed here. Tests that download data or weights fail on both sides on an offline machine and are not counted;
pytorch-tabular's conftest downloads its three datasets at import, so it is replaced by synthetic frames of the same
schemas (the same on both sides).
neuralforecast's release leaves out its tests' conftest (written here: one fixture over the package's own
AirPassengers data) and the models saved by older versions that its migration tests load (those fail on both sides).
scvi-tools' release declares Python >= 3.12; it is installed with ``--ignore-requires-python`` and runs on this
interpreter's 3.11 (its code uses nothing newer); tests needing its optional extras (captum, torch_geometric, ...)
fail on both sides and are not counted. chemprop's release leaves its tests out: they come from GitHub's archive of
its release tag (``tests_from``), or from a checkout of that tag given with ``--tests-source DIR``; the package is
still its sdist. Its Ray Tune searches (``hpopt``) start a Ray cluster each and are left out. PyPI's torchvision
(lightly-train's) needs torch's CUDA libraries; on a CPU build of torch, stand-ins are loaded first
(``torchvision_on_cpu_torch``).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAFE = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4


@dataclass(frozen=True)
class Project:
    sdist: str  # name==version on PyPI
    folder: str  # the sdist's top folder
    deps: tuple[str, ...]  # pinned where the project pins them; the rest comes from this interpreter
    tests: tuple[str, ...]  # pytest arguments
    per_file: int = 0  # >0: at most this many tests per file, evenly spaced (a fixed sample of a large suite)
    conftest: str = ""  # a replacement tests/conftest.py (offline data)
    files: dict[str, str] = field(default_factory=dict)  # files the release lacks, written into it (path: text)
    env: dict[str, str] = field(default_factory=dict)
    install: tuple[str, ...] = ()  # extra arguments to pip for the project itself
    tests_from: str = ""  # owner/name@tag on GitHub: the release's tagged source, when its sdist leaves the tests out


LITGPT_FILES = ("adapter", "adapter_v2", "api", "batch", "chat", "ci", "distributed", "lora", "pretrain", "serve",
                "trainer_support", "utils", "full", "merge_lora", "generate_speculatively", "args", "cli", "config",
                "evaluate", "prompts", "validate", "model", "rope", "yarn", "deepseek_moe",
                "multihead_latent_attention", "types")

TABULAR_CONFTEST = '''"""Synthetic frames with the schemas of the datasets the original conftest downloads."""
import numpy as np
import pandas as pd
import pytest


def _split(df):
    test_idx = df.sample(int(0.2 * len(df)), random_state=42).index
    return df[~df.index.isin(test_idx)], df[df.index.isin(test_idx)]


@pytest.fixture(scope="session", autouse=True)
def regression_data():
    rng = np.random.default_rng(0)
    n = 5000
    df = pd.DataFrame({"MedInc": rng.gamma(3, 1.3, n), "HouseAge": rng.integers(1, 52, n).astype(float),
                       "AveRooms": rng.normal(5.4, 1.0, n), "AveBedrms": rng.normal(1.1, 0.1, n),
                       "Population": rng.integers(3, 5000, n).astype(float), "AveOccup": rng.normal(3.0, 0.5, n),
                       "Latitude": rng.uniform(32.5, 42.0, n), "Longitude": rng.uniform(-124.3, -114.3, n)})
    df["MedHouseVal"] = 0.4 * df.MedInc + 0.01 * df.HouseAge + rng.normal(0, 0.3, n)
    df["HouseAgeBin"] = "age_" + pd.qcut(df["HouseAge"], q=4).cat.codes.astype(str)
    return (*_split(df), ["MedHouseVal"])


@pytest.fixture(scope="session", autouse=True)
def classification_data():
    rng = np.random.default_rng(1)
    n = 10000
    x = rng.normal(0, 1, (n, 54))
    x[:, 10:] = (x[:, 10:] > 1.0).astype(float)
    y = (np.digitize(x[:, 0] + 0.5 * x[:, 1], [-1.5, -0.8, -0.2, 0.2, 0.8, 1.5]) + 1).astype(float)
    df = pd.DataFrame(np.hstack([x, y[:, None]]), columns=[f"feature_{i}" for i in range(54)] + ["target"])
    df["feature_0_cat"] = "feature_0_" + pd.qcut(df["feature_0"], q=4).cat.codes.astype(str)
    return (*_split(df), ["target"])


@pytest.fixture(scope="session", autouse=True)
def timeseries_data():
    rng = np.random.default_rng(2)

    def frame(n, start):
        light = rng.uniform(0, 1000, n)
        return pd.DataFrame({"date": pd.date_range(start, periods=n, freq="min").strftime("%Y-%m-%d %H:%M:%S"),
                             "Temperature": rng.normal(21, 1, n), "Humidity": rng.normal(27, 4, n), "Light": light,
                             "CO2": rng.normal(700, 200, n), "HumidityRatio": rng.normal(0.004, 5e-4, n),
                             "Occupancy": (light > 500).astype(int)})

    return pd.concat([frame(8143, "2015-02-04 17:51"), frame(2665, "2015-02-02 14:19")]), \\
        frame(9752, "2015-02-11 14:48"), ["Occupancy"]
'''

NEURALFORECAST_CONFTEST = '''"""The fixture the source release's tests use and it does not ship: the package's
AirPassengers panel, the last twelve months of each series held out (targets unknown)."""
import numpy as np
import pytest

from neuralforecast.utils import AirPassengersPanel


@pytest.fixture
def setup_airplane_data():
    last = AirPassengersPanel["ds"].values[-12]
    train = AirPassengersPanel[AirPassengersPanel["ds"] < last].reset_index(drop=True)
    test = AirPassengersPanel[AirPassengersPanel["ds"] >= last].reset_index(drop=True)
    test["y"] = np.nan
    test["y_[lag12]"] = np.nan
    return train, test
'''

PROJECTS = {
    # Fabric: pretraining, full / LoRA / adapter fine-tuning, generation (tests of tokenizers and the model zoo's
    # Hugging Face names need the network and are left out)
    "litgpt": Project("litgpt==0.5.13", "litgpt-0.5.13",
                      ("huggingface-hub>=0.30,<1.4", "jsonargparse[signatures]>=4.37,<=4.41",
                       "transformers>=4.51.3,<4.57", "pytest>=8.1.1,<9", "pytest-dependency", "pytest-rerunfailures",
                       "pytest-benchmark", "pytest-timeout", "sentencepiece"),
                      tuple(f"tests/test_{name}.py" for name in LITGPT_FILES),
                      env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}),
    # the Trainer: forecasting models trained, checkpointed, reloaded with load_from_checkpoint, tuned
    "pytorch-forecasting": Project("pytorch-forecasting==1.8.0", "pytorch_forecasting-1.8.0",
                                   ("pandas>=1.3.0,<3.1.0", "scikit-base<1.1.0", "pytest>=8,<9", "pytest-timeout"),
                                   ("tests",)),
    # the Trainer through pytorch_lightning's package name: tabular models, 7,692 tests, sampled per file
    "pytorch-tabular": Project("pytorch-tabular==1.2.0", "pytorch_tabular-1.2.0",
                               ("pytorch-lightning==2.6.6", "pandas>=1.1.5,<3.0.0", "torchmetrics>=0.10.0,<1.9.0",
                                "einops>=0.6.0,<0.9.0", "scikit-base", "pytest>=8,<9", "pytest-timeout"),
                               ("tests",), per_file=15, conftest=TABULAR_CONFTEST),
    # the Trainer through pytorch_lightning's package name: forecasting models fitted, cross-validated, saved and
    # reloaded, tuned with Optuna and Ray Tune (its test series are synthetic or shipped with the package)
    "neuralforecast": Project("neuralforecast==3.3.0", "neuralforecast-3.3.0",
                              ("coreforecast>=0.0.6", "utilsforecast>=0.2.3", "optuna", "tornado>=6.5.5", "polars",
                               "fugue", "captum", "pytest-timeout"),
                              ("tests",), conftest=NEURALFORECAST_CONFTEST,
                              files={"tests/__init__.py": ""}),  # test_core imports .test_helpers
    # the Trainer under lightning's package name: single-cell models (VAEs, Pyro models) trained with the project's
    # own TrainingPlans, callbacks, progress bar and data splitters, saved and reloaded; its model, training, data
    # loader and module tests, sampled per file (darts, asked for first, ships no tests in its source release)
    "scvi-tools": Project("scvi-tools==1.5.1", "scvi_tools-1.5.1",
                          ("anndata", "docrep>=0.3.2", "ml-collections", "mudata", "numba>=0.60", "pyro-ppl",
                           "scanpy>=1.10", "sparse>=0.14", "xarray", "pytest-timeout"),
                          ("tests/model", "tests/train", "tests/external", "tests/dataloaders", "tests/module"),
                          per_file=10, install=("--ignore-requires-python",)),
    # the Trainer under lightning's package name: gluonts' torch forecasting estimators (DeepAR, TFT, PatchTST, TiDE,
    # ...) trained, serialized, reloaded, trained further from a predictor, and its torch modules and distributions:
    # its whole torch suite (darts, asked for first, ships no tests in its source release); the conftest seeds each
    # test from the machine's random source unless MXNET_TEST_SEED is set, so it is fixed here, the same on both sides
    "gluonts": Project("gluonts==0.17.0", "gluonts-0.17.0",
                       ("pandas>=1.4,<3", "toolz~=0.10", "orjson", "ujson", "pytest-timeout"),
                       ("test/torch",), env={"MXNET_TEST_SEED": "0"}),
    # the Trainer under lightning's package name: message-passing networks for molecules and reactions trained,
    # checkpointed, reloaded and exported by its integration tests and its CLI (train, predict, fingerprint, convert);
    # its sdist leaves the tests out, so they come from the release's tag on GitHub
    "chemprop": Project("chemprop==2.3.1", "chemprop-2.3.1",
                        ("rdkit==2026.3.6", "cuik-molmaker-pin==2026.3.6", "astartes[molecules]", "ConfigArgParse",
                         "descriptastorus", "myerson>=1.0.1", "pytest-timeout"),
                        ("tests/integration", "tests/cli", "tests/unit/models", "tests/unit/utils", "-k",
                         "not optuna and not hyperopt"),  # Ray Tune's searches: a Ray cluster each, minutes
                        per_file=5, tests_from="chemprop/chemprop@v2.3.1"),
    # Fabric and the Trainer under lightning_fabric's and pytorch_lightning's package names: self-supervised
    # pretraining (DINO, SimCLR, distillation...) run by Fabric, fine-tuning tasks run by the Trainer, export,
    # embedding; its callbacks, loggers, checkpoints and command line
    "lightly-train": Project("lightly-train==0.18.0", "lightly_train-0.18.0",
                             ("albumentations>=1.3.1,!=1.4.*", "eval-type-backport>=0.2", "lightly>=1.5.26",
                              "nvidia-ml-py>=12", "torchvision==0.28.0", "pycocotools>=2.0.11", "pytest-mock>=3.14.0",
                              "pytest-timeout"),
                             ("tests", "--ignore=tests/_transforms")),  # 3,600 augmentation tests without Lightning
}


def run(cmd: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kwargs)


def add_tests(tagged: str, source: Path, workdir: Path, local: Path | None) -> None:
    """The ``tests`` folder of the project's tagged source: from a checkout of that tag (``--tests-source``), else
    from GitHub's archive of the tag. The package itself is still the sdist from PyPI."""
    repo, tag = tagged.split("@")
    if local is not None:
        shutil.copytree(local / "tests", source / "tests")
        return
    archive = workdir / f"{repo.replace('/', '+')}-{tag}.tar.gz"
    if not archive.exists():
        urllib.request.urlretrieve(f"https://github.com/{repo}/archive/refs/tags/{tag}.tar.gz", archive)
    with tarfile.open(archive) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        members = [m for m in tar.getmembers() if m.name.startswith(f"{top}/tests/")]
        for member in members:
            member.name = member.name[len(top) + 1:]
        tar.extractall(source, members=members, **SAFE)


def prepare(project: Project, workdir: Path, tests_source: Path | None = None) -> tuple[Path, Path]:
    """The extracted sdist and its virtual environment's python (made once per workdir)."""
    venv = workdir / f"venv-{project.folder}"
    python = venv / "bin" / "python"
    source = workdir / project.folder
    if not source.is_dir():
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "-d",
             str(workdir), *project.install, project.sdist])
        archive = next(workdir.glob(f"{project.folder}.tar.gz"))
        with tarfile.open(archive) as tar:
            tar.extractall(workdir, **SAFE)
        if project.tests_from:
            add_tests(project.tests_from, source, workdir, tests_source)
        if project.conftest:
            (source / "tests" / "conftest.py").write_text(project.conftest)
        for path, text in project.files.items():
            (source / path).write_text(text)
    if not python.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
        here = Path(run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
        (site / "zz_this_interpreter.pth").write_text(f"{here}\n")  # after the venv's own packages
        run([str(python), "-m", "pip", "install", "--quiet", *project.deps])
        run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", *project.install, "-e", str(source)])
        torchvision_on_cpu_torch(python, site, workdir)
    return source, python


STUB_PRELOAD = """import ctypes, glob, os
here = os.path.dirname(os.path.abspath(__file__))
stubs = os.path.join(here, "_cuda_stubs")
for lib in (os.path.join(stubs, "libc10_cuda.so"), os.path.join(stubs, "libtorch_cuda.so"),
            *glob.glob(os.path.join(here, "torchvision.libs", "libcudart*"))):
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
"""


def torchvision_on_cpu_torch(python: Path, site: Path, workdir: Path) -> None:
    """PyPI's torchvision for Linux is built against torch's CUDA build: its operators' library (``nms``, ...)
    needs ``libc10_cuda.so`` and ``libtorch_cuda.so``, which a CPU build of torch lacks, so ``import torchvision``
    fails. Its CPU kernels need nothing from them: stand-ins exporting the CUDA symbols it names (each traps if
    called) are loaded first, at interpreter start, in the project's venv only (the same on both sides)."""
    library = site / "torchvision" / "_C.so"
    if not library.exists() or run([str(python), "-c", "import torch; assert torch.version.cuda is None"],
                                   check=False).returncode:
        return
    undefined = run(["nm", "-D", "--undefined-only", str(library)]).stdout.split()
    names = sorted({n.split("@")[0] for n in undefined if n.startswith(("_ZN3c104cuda", "_ZNK3c104cuda",
                                                                         "_ZN2at4cuda"))})
    stubs = site / "_cuda_stubs"
    stubs.mkdir(exist_ok=True)
    code = "\n".join(f"void *{n} = 0;" if n.endswith("allocatorE") else f"void {n}(void) {{ __builtin_trap(); }}"
                     for n in names)
    (workdir / "cuda_stubs.c").write_text(code + "\n")
    for name in ("libc10_cuda.so", "libtorch_cuda.so"):
        source = workdir / "cuda_stubs.c" if name == "libc10_cuda.so" else workdir / "empty.c"
        source.touch()
        run(["gcc", "-shared", "-fPIC", "-o", str(stubs / name), f"-Wl,-soname,{name}", str(source)])
    (site / "_torchvision_on_cpu_torch.py").write_text(STUB_PRELOAD)
    (site / "aa_torchvision_on_cpu_torch.pth").write_text("import _torchvision_on_cpu_torch\n")


def selection(project: Project, source: Path, python: Path) -> list[str]:
    if not project.per_file:
        return list(project.tests)
    listed = run([str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                  *project.tests], cwd=source, check=False).stdout
    by_file: dict[str, list[str]] = collections.OrderedDict()
    for line in listed.splitlines():
        if "::" in line:
            by_file.setdefault(line.split("::")[0], []).append(line.strip())
    picked = []
    for tests in by_file.values():
        picked += tests[::max(1, len(tests) // project.per_file)][:project.per_file]
    return picked


def run_side(side: str, project: Project, source: Path, python: Path, args: list[str], out: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYSPARK_PYTHON": str(python),
           **project.env}  # Spark's local workers run the project's interpreter
    env.pop("PYTHONPATH", None)
    if side == "relay":
        env.update(RELAY_LIGHTNING_COMPAT="1",
                   PYTHONPATH=os.pathsep.join([str(ROOT / "trainer" / "lightning_compat" / "boot"), str(ROOT)]))
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
                    "--timeout", "180", "-o", "addopts=", f"--junitxml={out}", *args],
                   cwd=source, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600)


def outcomes(path: Path) -> dict[str, tuple[str, str]]:
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kind, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                kind, message = child.tag, (child.get("message") or "").split("\n")[0][:160]
            elif child.tag == "skipped":
                kind = "skipped"
        found[f"{case.get('classname')}::{case.get('name')}"] = (kind, message)
    return found


def compare(name: str, lightning: Path, relay: Path) -> tuple[int, int]:
    on_lightning, on_relay = outcomes(lightning), outcomes(relay)
    passing = [t for t, (kind, _) in on_lightning.items() if kind == "passed"]
    causes: dict[str, list[str]] = collections.defaultdict(list)
    for test in passing:
        kind, message = on_relay.get(test, ("missing", ""))
        if kind != "passed":
            causes[f"{kind}: {message}"].append(test)
    ok = len(passing) - sum(len(t) for t in causes.values())
    print(f"{name}: {len(on_lightning)} tests run on Lightning, {len(passing)} pass; of those {ok} pass on Relay "
          f"({100 * ok / max(1, len(passing)):.1f}%)")
    for cause, tests in sorted(causes.items(), key=lambda item: -len(item[1])):
        print(f"  {len(tests):4d}  {cause}\n          {tests[0]}")
    return ok, len(passing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", action="append", choices=sorted(PROJECTS), help="default: all")
    parser.add_argument("--workdir", default="/tmp/relay-real-projects", type=Path)
    parser.add_argument("--tests-source", type=Path, help="for a project whose tests come from its tagged source: a "
                        "checkout of that tag (a folder holding its tests/), instead of GitHub's archive of it")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    totals = [0, 0]
    for name in args.project or sorted(PROJECTS):
        project = PROJECTS[name]
        source, python = prepare(project, args.workdir, args.tests_source)
        tests = selection(project, source, python)
        results = {side: args.workdir / f"{name}-{side}.xml" for side in ("lightning", "relay")}
        for side, out in results.items():
            run_side(side, project, source, python, tests, out)
        ok, passing = compare(name, results["lightning"], results["relay"])
        totals[0] += ok
        totals[1] += passing
    print(f"total: {totals[0]} of {totals[1]} tests that pass on Lightning pass on Relay")
    return 0


if __name__ == "__main__":
    sys.exit(main())
