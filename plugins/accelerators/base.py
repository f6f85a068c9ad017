"""What the Trainer needs to know about one kind of hardware, and nothing about distribution."""

from __future__ import annotations

from typing import Any

import torch


class Accelerator:
    """Availability, device count, the device of a local rank, the collective backend and memory stats."""

    name: str = ""
    description: str = ""

    @classmethod
    def is_gpu(cls) -> bool:
        """Whether ``accelerator="gpu"`` may pick this kind."""
        return False

    @staticmethod
    def is_available() -> bool:
        raise NotImplementedError

    @staticmethod
    def device_count() -> int:
        raise NotImplementedError

    @classmethod
    def auto_device_count(cls) -> int:
        """How many devices ``devices="auto"`` uses (Lightning's name): the CPU counts as one, a GPU kind as all
        of its devices, an absent kind as none."""
        if cls.name == "cpu":
            return 1
        return cls.device_count() if cls.is_available() else 0

    def device_for(self, local_rank: int, device_ids: list[int] | None = None) -> torch.device:
        """The device a process with this local rank uses (``device_ids`` are the chosen indices)."""
        raise NotImplementedError

    @property
    def distributed_backend(self) -> str:
        """Name of the ``torch.distributed`` backend that goes with this hardware."""
        return "gloo"

    def setup_device(self, device: torch.device) -> None:
        """Make ``device`` current for this process (e.g. ``torch.cuda.set_device``)."""

    def device_stats(self, device: torch.device) -> dict[str, Any]:
        """Memory / utilization figures for a device-stats callback."""
        return {}

    def teardown(self) -> None: ...

    @classmethod
    def register_accelerators(cls, accelerator_registry: Any) -> None:
        """Lightning's registration hook: this class under its name (Relay's own registry lists it already)."""
        accelerator_registry.register(cls.name, cls, description=cls.__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
