"""``python -m trainer install-horovod``: the cache layout, the C++17 patch and the build switches.

The build itself (about 15 minutes on 2 cores) runs in CI (``.ci/run``); here the pieces it is made of run
on small real inputs, and the command is run for real to print where this machine's wheel lives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from trainer.cli import install_horovod as ih

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("torch", "expected"), [
    ("2.13.0+cpu", "0.28.1-torch2.13.0-cp"),
    ("2.13.0", "0.28.1-torch2.13.0-cp"),
    ("2.13.0+cu128", "0.28.1-torch2.13.0+cu128-cp"),  # a CUDA build links other libraries: its own wheel
])
def test_cache_key_names_horovod_torch_and_python(torch, expected):
    assert ih.cache_key("0.28.1", torch) == f"{expected}{sys.version_info.major}{sys.version_info.minor}"


# Relay's dependencies besides torch: CI runs install-horovod before any of them is installed
NOT_YET_INSTALLED = ("lightning_utilities", "hydra", "omegaconf", "fsspec", "tensorboard", "yaml", "numpy")
BLOCKER = """
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
sys.meta_path.insert(0, NotInstalled())
"""


def test_print_cache_dir_is_outside_the_repository(tmp_path):
    """Runs as CI runs it: only torch installed (the other dependencies cannot be imported)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(NOT_YET_INSTALLED)))
    pythonpath = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "RELAY_CACHE_DIR": str(tmp_path), "PYTHONPATH": pythonpath}
    done = subprocess.run([sys.executable, "-m", "trainer", "install-horovod", "--print-cache-dir"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    import torch

    assert Path(done.stdout.strip()) == tmp_path / "horovod" / ih.cache_key("0.28.1", torch.__version__)


def _source(tmp_path: Path, line: str = "set(CMAKE_CXX_STANDARD 14)") -> Path:
    for name in ih.PATCHED:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"project(x)\n{line}\nset(CMAKE_CXX_STANDARD_REQUIRED ON)\n")
    return tmp_path


def test_patch_switches_both_cmake_files_to_cxx17(tmp_path):
    source = _source(tmp_path)
    ih.patch_cxx_standard(source)
    for name in ih.PATCHED:
        text = (source / name).read_text()
        assert "set(CMAKE_CXX_STANDARD 17)" in text and "CMAKE_CXX_STANDARD 14" not in text
    ih.patch_cxx_standard(source)  # patching again (a kept source tree) is fine


def test_patch_refuses_an_unknown_source(tmp_path):
    with pytest.raises(SystemExit, match="no 'set\\(CMAKE_CXX_STANDARD 14\\)' line"):
        ih.patch_cxx_standard(_source(tmp_path, "set(CMAKE_CXX_STANDARD 11)"))


def _tool(folder: Path, name: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("#!/bin/sh\nexit 0\n")
    (folder / name).chmod(0o755)


@pytest.mark.parametrize(("tools", "cuda", "chosen", "switches"), [
    ([], None, ["gloo"], {"HOROVOD_WITHOUT_MPI": "1", "HOROVOD_CPU_OPERATIONS": "GLOO"}),
    (["mpicxx"], None, ["gloo", "MPI"], {"HOROVOD_WITH_MPI": "1"}),
    (["nvcc"], "12.8", ["gloo", "NCCL (CUDA 12.8)"], {"HOROVOD_GPU_OPERATIONS": "NCCL"}),
    ([], "12.8", ["gloo"], {"HOROVOD_WITHOUT_MPI": "1"}),  # a CUDA torch without nvcc: said, and no NCCL
])
def test_build_switches_follow_the_machine(tmp_path, monkeypatch, tools, cuda, chosen, switches):
    for tool in tools:
        _tool(tmp_path / "bin", tool)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("HOROVOD_WITH_TENSORFLOW", "1")  # a stale switch in the caller's shell is dropped
    env, got = ih.build_env(cuda, jobs=2)
    assert got == chosen
    for key, value in switches.items():
        assert env[key] == value
    assert env["HOROVOD_WITH_PYTORCH"] == env["HOROVOD_WITH_GLOO"] == "1"
    assert "HOROVOD_WITH_TENSORFLOW" not in env and env["HOROVOD_WITHOUT_TENSORFLOW"] == "1"
    assert env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5"  # cmake 4 builds gloo's old CMakeLists too
    assert env["MAKEFLAGS"] == "-j2"
    assert ("HOROVOD_GPU_OPERATIONS" in env) == any(c.startswith("NCCL") for c in chosen)


def test_the_sdist_unpacks_and_a_member_outside_it_is_refused(tmp_path, monkeypatch):
    """tarfile's ``filter="data"`` is missing before Python 3.11.4 (Debian 12's 3.11.2: the build failed there with
    a TypeError); without it the same members are refused before anything is written. Both ways, whichever this
    Python has: as it is, then with the filter taken away."""
    import io
    import tarfile

    def sdist(name: str, *members: tuple[str, bytes]) -> Path:
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as tar:
            for member, data in members:
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    good = sdist("good.tar.gz", ("horovod-0.28.1/setup.py", b"print('built')\n"))
    bad = sdist("bad.tar.gz", ("horovod-0.28.1/setup.py", b""), ("../escaped.txt", b"x"))
    for way in ("as-is", "no-filter"):
        if way == "no-filter":
            monkeypatch.delattr(tarfile, "data_filter", raising=False)
        ih.unpack(good, tmp_path / way / "good")
        assert (tmp_path / way / "good" / "horovod-0.28.1" / "setup.py").read_bytes() == b"print('built')\n"
        with pytest.raises((RuntimeError, tarfile.TarError)):
            ih.unpack(bad, tmp_path / way / "bad")
        assert not (tmp_path / way / "escaped.txt").exists()


def test_the_extra_lists_what_the_installer_installs():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["horovod"]
    assert sorted(extra) == sorted(ih.RUNTIME_DEPS)


def test_a_cached_wheel_is_installed_without_building(tmp_path, monkeypatch):
    """The cache decides: with a wheel in place no download or build starts (pip and the check are recorded)."""
    import torch

    folder = tmp_path / "horovod" / ih.cache_key(ih.HOROVOD_VERSION, torch.__version__)
    folder.mkdir(parents=True)
    wheel = folder / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    monkeypatch.setenv("RELAY_CACHE_DIR", str(tmp_path))
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(ih, "pip", lambda *args, quiet=True: calls.append(args))
    monkeypatch.setattr(ih, "verify", lambda: calls.append(("verify",)))
    monkeypatch.setattr(ih, "build_wheel", lambda *a: pytest.fail("built although a wheel was cached"))
    assert ih.main([]) == 0
    assert calls == [("install", *ih.RUNTIME_DEPS), ("install", "--no-deps", "--force-reinstall", str(wheel)),
                     ("verify",)]


def test_the_docs_and_the_missing_horovod_error_name_this_command():
    from plugins.strategies.horovod import INSTALL_COMMAND, horovod_missing_message

    text = (ROOT / "docs" / "guides" / "strategies.md").read_text()
    block = text.split("<!-- horovod-command -->", 1)[1].split("<!-- /horovod-command -->", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("```")]
    assert commands == [INSTALL_COMMAND]
    assert INSTALL_COMMAND in horovod_missing_message()
    assert INSTALL_COMMAND.split()[-1] == "install-horovod"  # the subcommand trainer/__main__.py dispatches
