"""Everything in one process on one device."""

from __future__ import annotations

import torch

from plugins.accelerators.base import Accelerator
from plugins.precision.base import Precision
from plugins.strategies.base import Strategy


class SingleDeviceStrategy(Strategy):
    name = "single_device"

    def __init__(
        self,
        device: str | torch.device | None = None,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
    ) -> None:
        super().__init__(accelerator=accelerator, precision=precision)
        self._device = torch.device(device) if device is not None else None

    @property
    def root_device(self) -> torch.device:
        if self._device is None:
            self._device = self.accelerator.device_for(0, self.device_ids) if self.accelerator else torch.device("cpu")
        return self._device
