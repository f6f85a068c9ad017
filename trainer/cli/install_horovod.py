"""``python -m trainer install-horovod``: build Horovod 0.28.1 for the installed torch, cache the wheel, install it.

pip cannot install Horovod against torch 2.x: 0.28.1 (the last release) has no wheels, and its source
compiles the torch extension as C++14 while torch's headers need C++17. This command

1. installs from the cache when a wheel for this Horovod, torch and Python is there
   (``~/.cache/relaytrain/horovod/<horovod>-torch<torch>-cp<py>/``, or under ``$RELAY_CACHE_DIR``);
2. otherwise fetches the source distribution from the package registry
   (``pip download --no-binary :all: --no-deps horovod==0.28.1``), switches the two
   ``set(CMAKE_CXX_STANDARD 14)`` lines to 17, and builds a wheel with gloo (plus MPI when ``mpicxx``
   is on PATH, NCCL when torch is a CUDA build and ``nvcc`` is found) against the installed torch,
   without build isolation; the wheel goes into the cache, then it is installed.

Standard library only (it runs right after torch is installed, before anything else). cmake 4 refuses
gloo's old ``cmake_minimum_required``; ``CMAKE_POLICY_VERSION_MINIMUM=3.5`` lets any cmake >= 3.13 build it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HOROVOD_VERSION = "0.28.1"
RUNTIME_DEPS = ("cloudpickle", "psutil", "pyyaml", "packaging", "cffi>=1.4.0")  # horovod's own requirements
PATCHED = ("CMakeLists.txt", "horovod/torch/CMakeLists.txt")


def torch_version() -> tuple[str, str | None]:
    """(torch's version, its CUDA version or None), read from the installed torch."""
    code = "import torch; print(torch.__version__); print(torch.version.cuda or '')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("install-horovod: torch is not importable in this Python; install torch first "
                         "(e.g. pip install torch), then run: python -m trainer install-horovod")
    version, cuda = (out.stdout.splitlines() + ["", ""])[:2]
    return version.strip(), cuda.strip() or None


def cache_key(horovod: str, torch: str) -> str:
    """``0.28.1-torch2.13.0-cp311``; a CUDA or ROCm torch keeps its local tag (``torch2.13.0+cu128``)."""
    public, _, local = torch.partition("+")
    tag = public if local in ("", "cpu") else torch
    return f"{horovod}-torch{tag}-cp{sys.version_info.major}{sys.version_info.minor}"


def cache_root() -> Path:
    if os.environ.get("RELAY_CACHE_DIR"):
        return Path(os.environ["RELAY_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "relaytrain"


def pip(*args: str, quiet: bool = True) -> None:
    command = [sys.executable, "-m", "pip", *(["--quiet"] if quiet else []), *args]
    print("+ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


def patch_cxx_standard(source: Path) -> None:
    """C++14 -> C++17 in both CMake files; an error when the lines are not there (another Horovod version)."""
    for name in PATCHED:
        path = source / name
        text = path.read_text()
        new, count = re.subn(r"set\(CMAKE_CXX_STANDARD 14\)", "set(CMAKE_CXX_STANDARD 17)", text)
        if count == 0 and "CMAKE_CXX_STANDARD 17" not in text:
            raise SystemExit(f"install-horovod: {path} has no 'set(CMAKE_CXX_STANDARD 14)' line to patch; "
                             f"this command knows Horovod {HOROVOD_VERSION} only.")
        path.write_text(new)


def build_env(cuda: str | None, jobs: int) -> tuple[dict[str, str], list[str]]:
    """The HOROVOD_* switches for this machine, and what was chosen (for the log)."""
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("HOROVOD_") and name not in ("HOROVOD_NCCL_HOME", "HOROVOD_CUDA_HOME"):
            env.pop(name)  # a stale setting from the caller's shell must not change the build
    env.update(HOROVOD_WITH_PYTORCH="1", HOROVOD_WITH_GLOO="1", HOROVOD_WITHOUT_TENSORFLOW="1",
               HOROVOD_WITHOUT_MXNET="1", MAKEFLAGS=f"-j{jobs}", CMAKE_POLICY_VERSION_MINIMUM="3.5")
    chosen = ["gloo"]
    if shutil.which("mpicxx"):
        env["HOROVOD_WITH_MPI"] = "1"
        chosen.append("MPI")
    else:
        env["HOROVOD_WITHOUT_MPI"] = "1"
        env["HOROVOD_CPU_OPERATIONS"] = "GLOO"
    if cuda:
        if shutil.which("nvcc") or os.environ.get("CUDA_HOME"):
            env["HOROVOD_GPU_OPERATIONS"] = "NCCL"
            chosen.append(f"NCCL (CUDA {cuda})")
        else:
            print(f"install-horovod: torch is a CUDA {cuda} build but nvcc is not on PATH (and CUDA_HOME is unset); "
                  "building without NCCL (GPU tensors go through gloo). Install the CUDA toolkit for NCCL.", flush=True)
    return env, chosen


def unpack(archive: Path, into: Path) -> None:
    """Unpack Horovod's sdist with tarfile's ``data`` filter where this Python has it (3.11.4 and later; Debian 12's
    3.11.2 has not), else with the same refusal checked first: only files and directories, none outside ``into``."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
            return
        root = into.resolve()
        for member in tar.getmembers():
            target = (root / member.name).resolve()
            if not (member.isfile() or member.isdir()) or (target != root and root not in target.parents):
                raise RuntimeError(f"install-horovod: {archive.name} holds {member.name!r}, which is not a plain file "
                                   f"or directory inside the unpacked source; refusing to unpack it")
        tar.extractall(into)  # noqa: S202 (every member checked above)


def check_tools() -> None:
    missing = [tool for tool in ("cmake", "make", "g++") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"install-horovod: {', '.join(missing)} not found; Horovod compiles C++ "
                         "(e.g. apt-get install cmake g++ make), then run: python -m trainer install-horovod")
    out = subprocess.run(["cmake", "--version"], capture_output=True, text=True).stdout
    found = re.search(r"(\d+)\.(\d+)", out)
    if found and (int(found.group(1)), int(found.group(2))) < (3, 13):
        raise SystemExit(f"install-horovod: cmake {found.group(0)} is too old (Horovod needs >= 3.13).")


def build_wheel(target: Path, cuda: str | None, jobs: int) -> Path:
    """Download, patch and build; the wheel is moved into ``target`` only once complete."""
    check_tools()
    try:
        import setuptools  # noqa: F401  (Horovod's setup.py builds in this environment: no build isolation)
        import wheel  # noqa: F401
    except ImportError:
        pip("install", "setuptools", "wheel")
    with tempfile.TemporaryDirectory(prefix="relay-horovod-") as tmp:
        work = Path(tmp)
        pip("download", "--no-binary", ":all:", "--no-deps", "--no-build-isolation", f"horovod=={HOROVOD_VERSION}",
            "-d", str(work))
        (archive,) = work.glob("horovod-*.tar.gz")
        unpack(archive, work)
        source = work / f"horovod-{HOROVOD_VERSION}"
        patch_cxx_standard(source)
        env, chosen = build_env(cuda, jobs)
        print(f"install-horovod: building Horovod {HOROVOD_VERSION} with {', '.join(chosen)} on {jobs} job(s); "
              "this takes about 15 minutes on 2 cores...", flush=True)
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                        str(work / "wheel"), str(source)], check=True, env=env)
        (wheel,) = (work / "wheel").glob("horovod-*.whl")
        target.mkdir(parents=True, exist_ok=True)
        partial = target / (wheel.name + ".partial")
        shutil.copy2(wheel, partial)
        os.replace(partial, target / wheel.name)
        print(f"install-horovod: built in {time.monotonic() - start:.0f} s: {target / wheel.name}", flush=True)
        return target / wheel.name


@contextlib.contextmanager
def locked(directory: Path):
    """One build per cache entry at a time (a second caller waits, then finds the wheel)."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def verify() -> None:
    code = ("import horovod, horovod.torch as hvd; "
            "print(f'horovod {horovod.__version__}: gloo={hvd.gloo_built()} mpi={hvd.mpi_built()} nccl={bool(hvd.nccl_built())}')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"install-horovod: the installed Horovod does not import ({tail}); rebuild with: "
                         "python -m trainer install-horovod --rebuild")
    print(f"install-horovod: {done.stdout.strip()}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer install-horovod", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rebuild", action="store_true", help="build again even when a cached wheel exists")
    parser.add_argument("--build-only", action="store_true", help="fill the cache, do not install")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile jobs")
    parser.add_argument("--print-cache-dir", action="store_true", help="print this machine's cache folder and exit")
    args = parser.parse_args(argv)
    torch, cuda = torch_version()
    directory = cache_root() / "horovod" / cache_key(HOROVOD_VERSION, torch)
    if args.print_cache_dir:
        print(directory)
        return 0
    with locked(directory):
        wheels = sorted(directory.glob("horovod-*.whl"))
        if wheels and not args.rebuild:
            wheel = wheels[-1]
            print(f"install-horovod: using the cached wheel {wheel}", flush=True)
        else:
            for old in wheels:
                old.unlink()
            wheel = build_wheel(directory, cuda, max(1, args.jobs))
    if args.build_only:
        return 0
    pip("install", *RUNTIME_DEPS)
    pip("install", "--no-deps", "--force-reinstall", str(wheel))
    verify()
    return 0


if __name__ == "__main__":
    sys.exit(main())
