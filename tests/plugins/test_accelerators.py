"""Accelerators: the CPU for real, CUDA for real when a GPU is lent, the rest at the selection level.

ROCm, XPU and MPS are hardware we lack: their tests patch availability with monkeypatch and check
only what Relay decides from it (availability, device count, devices, backend name, stats plumbing).
"""

from __future__ import annotations

import subprocess
import sys
import time
import types

import pytest
import torch

from plugins.accelerators import (
    Accelerator,
    CPUAccelerator,
    CUDAAccelerator,
    MPSAccelerator,
    ROCmAccelerator,
    XPUAccelerator,
)

ALL = [CPUAccelerator, CUDAAccelerator, ROCmAccelerator, XPUAccelerator, MPSAccelerator]
GPU_COUNT = 4


@pytest.fixture
def rocm_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ROCm build of torch with GPU_COUNT AMD GPUs visible."""
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: GPU_COUNT)


@pytest.fixture
def nvidia_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build of torch with GPU_COUNT NVIDIA GPUs visible."""
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: GPU_COUNT)


@pytest.fixture
def fake_xpu(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A ``torch.xpu`` with GPU_COUNT devices that records ``set_device`` calls (replaces any real one)."""
    calls: list[torch.device] = []
    xpu = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: GPU_COUNT,
        set_device=calls.append,
        memory_stats=lambda device: {"allocated_bytes.all.current": 3 * 2**20, "allocated_bytes.all.peak": 5 * 2**20},
        set_device_calls=calls,
    )
    monkeypatch.setattr(torch, "xpu", xpu, raising=False)
    return xpu


# --- every accelerator -------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
def test_interface_and_metadata(cls: type[Accelerator]) -> None:
    assert issubclass(cls, Accelerator)
    assert cls.name and cls.description and "\n" not in cls.description
    assert cls.is_gpu() is (cls is not CPUAccelerator)
    assert isinstance(cls.is_available(), bool)
    assert isinstance(cls.device_count(), int)


def test_import_is_cheap() -> None:
    """``plugins.accelerators`` imports torch and nothing optional or slow."""
    probe = "import sys, plugins.accelerators; print('\\n'.join(sorted(sys.modules)))"
    mods = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    assert not {"torch._dynamo", "sympy", "psutil", "pynvml", "amdsmi", "trainer"} & mods


# --- CPU, for real -----------------------------------------------------------------------------


def test_cpu_device_backend_and_count() -> None:
    acc = CPUAccelerator()
    assert CPUAccelerator.is_available()
    assert acc.device_for(0) == acc.device_for(3, [0, 1, 2, 3]) == torch.device("cpu")
    assert acc.distributed_backend == "gloo"
    assert acc.device_count() >= 1


def test_cpu_device_stats() -> None:
    acc = CPUAccelerator()
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:  # burn some CPU so cpu_percent has something to see
        pass
    stats = acc.device_stats(torch.device("cpu"))
    assert {"max_rss_mb", "cpu_percent"} <= stats.keys()
    if sys.platform.startswith("linux"):
        assert stats["rss_mb"] > 0
        assert stats["max_rss_mb"] >= stats["rss_mb"] * 0.9  # sampled at slightly different times
    assert stats["cpu_percent"] > 0

    held = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    after = acc.device_stats(torch.device("cpu"))
    if "rss_mb" in stats:
        assert after["rss_mb"] > stats["rss_mb"] + 32
    assert after["max_rss_mb"] >= stats["max_rss_mb"]
    assert after["cpu_percent"] >= 0
    del held


# --- CUDA, for real when there is a GPU --------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.skipif(not CUDAAccelerator.is_available(), reason="needs an NVIDIA GPU")
def test_cuda_real_devices_and_stats() -> None:
    acc = CUDAAccelerator()
    assert acc.device_count() == torch.cuda.device_count() >= 1
    assert acc.distributed_backend == "nccl"
    for index in range(acc.device_count()):
        device = acc.device_for(index)
        assert device == torch.device("cuda", index)
        acc.setup_device(device)
        assert torch.cuda.current_device() == index
        before = acc.device_stats(device)
        x = torch.randn(1024, 1024, device=device)  # 4 MiB
        torch.cuda.synchronize(device)
        after = acc.device_stats(device)
        assert x.device == device
        assert after["allocated_mb"] >= before["allocated_mb"] + 4
        assert after["peak_allocated_mb"] >= after["allocated_mb"]
        assert after["reserved_mb"] >= after["allocated_mb"]
        if "utilization_percent" in after:  # only with pynvml installed
            assert 0 <= after["utilization_percent"] <= 100
        del x
    acc.teardown()


# --- NVIDIA vs AMD: selection level -----------------------------------------------------------


def test_cuda_selection_on_nvidia_build(nvidia_build: None) -> None:
    """Hardware we lack (here: several NVIDIA GPUs): selection level only."""
    acc = CUDAAccelerator()
    assert CUDAAccelerator.is_available() and CUDAAccelerator.device_count() == GPU_COUNT
    assert not ROCmAccelerator.is_available() and ROCmAccelerator.device_count() == 0
    assert acc.device_for(1) == torch.device("cuda", 1)
    assert acc.device_for(1, [2, 3]) == torch.device("cuda", 3)
    assert acc.distributed_backend == "nccl"


def test_rocm_selection(rocm_build: None) -> None:
    """Hardware we lack (AMD GPUs on ROCm): selection level only."""
    acc = ROCmAccelerator()
    assert ROCmAccelerator.is_available() and ROCmAccelerator.device_count() == GPU_COUNT
    assert acc.device_for(0) == torch.device("cuda", 0)
    assert acc.device_for(1, [2, 3]) == torch.device("cuda", 3)
    assert acc.distributed_backend == "nccl"  # RCCL answers to the nccl name


def test_cuda_not_available_on_rocm_build(rocm_build: None) -> None:
    """Hardware we lack (AMD GPUs on ROCm): selection level only."""
    assert not CUDAAccelerator.is_available()
    assert CUDAAccelerator.device_count() == 0


def test_rocm_not_available_without_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardware we lack (a ROCm build on a machine with no AMD GPU): selection level only."""
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not ROCmAccelerator.is_available() and not CUDAAccelerator.is_available()


@pytest.mark.parametrize("cls", [CUDAAccelerator, ROCmAccelerator])
def test_gpu_stats_without_utilization_library(cls: type[Accelerator], monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardware we lack: stats plumbing only, with memory_stats patched and no pynvml/amdsmi."""

    def no_library(device: object = None) -> int:
        raise ModuleNotFoundError("nvidia-ml-py does not seem to be installed")

    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device: {"allocated_bytes.all.current": 2**21})
    monkeypatch.setattr(torch.cuda, "utilization", no_library)
    stats = cls().device_stats(torch.device("cuda", 0))
    assert stats["allocated_mb"] == 2.0 and stats["reserved_mb"] == 0
    assert "utilization_percent" not in stats

    monkeypatch.setattr(torch.cuda, "utilization", lambda device=None: 37)
    assert cls().device_stats(torch.device("cuda", 0))["utilization_percent"] == 37.0


# --- Intel XPU: selection level ---------------------------------------------------------------


def test_xpu_selection(fake_xpu: types.SimpleNamespace) -> None:
    """Hardware we lack (Intel GPUs): selection level only."""
    acc = XPUAccelerator()
    assert XPUAccelerator.is_available() and XPUAccelerator.device_count() == GPU_COUNT
    assert acc.device_for(2) == torch.device("xpu", 2)
    assert acc.device_for(1, [0, 3]) == torch.device("xpu", 3)
    assert acc.distributed_backend == "xccl"
    acc.setup_device(torch.device("xpu", 3))
    assert fake_xpu.set_device_calls == [torch.device("xpu", 3)]
    stats = acc.device_stats(torch.device("xpu", 0))
    assert stats["allocated_mb"] == 3.0 and stats["peak_allocated_mb"] == 5.0
    assert "utilization_percent" not in stats  # this fake build has no torch.xpu.utilization


def test_xpu_on_builds_that_lack_parts(fake_xpu: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardware we lack (Intel GPUs): selection level only, with torch.xpu missing pieces or missing."""
    monkeypatch.delattr(fake_xpu, "memory_stats")
    monkeypatch.delattr(fake_xpu, "set_device")
    acc = XPUAccelerator()
    acc.setup_device(torch.device("xpu", 0))  # nothing to call: no error
    assert acc.device_stats(torch.device("xpu", 0)) == {}
    monkeypatch.delattr(torch, "xpu")
    assert not XPUAccelerator.is_available() and XPUAccelerator.device_count() == 0


def test_xpu_not_available_here_without_patching() -> None:
    """This machine's torch has no usable XPU, whatever its build says about torch.xpu."""
    if getattr(torch, "xpu", None) is not None and torch.xpu.is_available():
        pytest.skip("an Intel GPU is present")
    assert not XPUAccelerator.is_available()


# --- Apple MPS: selection level ---------------------------------------------------------------


def test_mps_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardware we lack (Apple silicon): selection level only."""
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    acc = MPSAccelerator()
    assert MPSAccelerator.is_available() and MPSAccelerator.device_count() == 1
    assert acc.device_for(0) == acc.device_for(0, [0]) == torch.device("mps", 0)
    assert acc.distributed_backend == "gloo"
    with pytest.raises(ValueError, match="exactly one device"):
        acc.device_for(1)
    with pytest.raises(ValueError, match="exactly one device"):
        acc.device_for(0, [1])


def test_mps_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardware we lack (Apple silicon): selection level only."""
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert not MPSAccelerator.is_available() and MPSAccelerator.device_count() == 0


def test_mps_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardware we lack (Apple silicon): stats plumbing only, with torch.mps patched."""
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 2**20)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 3 * 2**20)
    monkeypatch.delattr(torch.mps, "recommended_max_memory", raising=False)
    stats = MPSAccelerator().device_stats(torch.device("mps", 0))
    assert stats == {"allocated_mb": 1.0, "driver_allocated_mb": 3.0}
