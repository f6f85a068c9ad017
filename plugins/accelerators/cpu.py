"""The CPU: always there, one 'device', collectives over gloo."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import torch

from plugins.accelerators.base import Accelerator


def _rss_now_mb() -> float | None:
    """Resident memory now: /proc on Linux (no dependency), psutil elsewhere when it is installed."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return psutil.Process().memory_info().rss / 2**20


def _rss_peak_mb() -> float | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux


class CPUAccelerator(Accelerator):
    """The CPU; collectives over gloo."""

    name = "cpu"
    description = "The CPU; collectives over gloo"

    def __init__(self) -> None:
        # (wall, process CPU) seconds at the last device_stats call, for cpu_percent over that interval
        self._last_times = (time.monotonic(), self._process_cpu_seconds())

    @classmethod
    def is_gpu(cls) -> bool:
        return False

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return os.cpu_count() or 1

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        return torch.device("cpu")

    def setup_device(self, device: torch.device) -> None:
        if device.type != "cpu":
            raise ValueError(f"Device should be CPU, got {device} instead.")

    @staticmethod
    def parse_devices(devices: int | str) -> int:
        """The number of CPU processes: ``devices`` is an int > 0 or a string of one (Lightning's form)."""
        if isinstance(devices, str) and devices.strip().isdigit():
            devices = int(devices)
        if not isinstance(devices, int) or isinstance(devices, bool) or devices <= 0:
            raise TypeError("`devices` selected with `CPUAccelerator` should be an int > 0.")
        return devices

    @staticmethod
    def get_parallel_devices(devices: int | str) -> list[torch.device]:
        """One CPU device per process: ``devices`` is an int > 0 or a string of one (Lightning's form)."""
        return [torch.device("cpu")] * CPUAccelerator.parse_devices(devices)

    @staticmethod
    def _process_cpu_seconds() -> float:
        times = os.times()
        return times.user + times.system

    def get_device_stats(self, device: Any) -> dict[str, Any]:
        """Lightning's Trainer-side call: memory, CPU and swap use in percent, read with ``psutil`` (as Lightning's
        ``DeviceStatsMonitor`` logs them on the CPU)."""
        try:
            import psutil
        except ImportError as err:
            raise ModuleNotFoundError(f"Fetching CPU device stats requires `psutil` to be installed. {err}") from err
        return {"cpu_vm_percent": psutil.virtual_memory().percent, "cpu_percent": psutil.cpu_percent(),
                "cpu_swap_percent": psutil.swap_memory().percent}

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        """RSS now and at peak (MiB) and this process's CPU use since the previous call.

        ``cpu_percent`` is measured with ``os.times`` (all threads, so it can pass 100 on several
        cores) rather than psutil, so it needs no optional dependency; the first call measures from
        the accelerator's creation.
        """
        stats: dict[str, Any] = {}
        rss, peak = _rss_now_mb(), _rss_peak_mb()
        if rss is not None:
            stats["rss_mb"] = rss
        if peak is not None:
            stats["max_rss_mb"] = peak
        wall, cpu = time.monotonic(), self._process_cpu_seconds()
        last_wall, last_cpu = self._last_times
        if wall > last_wall:
            stats["cpu_percent"] = 100.0 * (cpu - last_cpu) / (wall - last_wall)
        self._last_times = (wall, cpu)
        return stats
