"""Everything in one process on one device."""

from __future__ import annotations

import torch

from plugins.accelerators.base import Accelerator
from plugins.checkpoint_io import CheckpointIO
from plugins.precision.base import Precision
from plugins.strategies.base import Strategy


class SingleDeviceStrategy(Strategy):
    name = "single_device"

    def __init__(
        self,
        device: str | torch.device | None = None,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
        checkpoint_io: CheckpointIO | None = None,
        *,
        precision_plugin: Precision | None = None,  # the Trainer-side name of ``precision`` (lightning.pytorch)
    ) -> None:
        """Lightning's arguments: ``(device, accelerator, checkpoint_io, precision)``, with the Trainer side's
        ``precision_plugin`` for ``precision`` (keyword only: Relay's third positional stays ``precision``)."""
        super().__init__(accelerator=accelerator, precision=precision or precision_plugin)
        self._device = torch.device(device) if device is not None else None
        if checkpoint_io is not None:
            self.checkpoint_io = checkpoint_io
        # plain values, as Lightning's single-device strategy holds them (code and tests set them)
        self._world_size, self._global_rank, self._local_rank = 1, 0, 0

    @property
    def world_size(self) -> int:
        return self._world_size

    @world_size.setter
    def world_size(self, value: int) -> None:
        self._world_size = value

    @property
    def global_rank(self) -> int:
        return self._global_rank

    @global_rank.setter
    def global_rank(self, value: int) -> None:
        self._global_rank = value

    @property
    def local_rank(self) -> int:
        return self._local_rank

    @local_rank.setter
    def local_rank(self, value: int) -> None:
        self._local_rank = value

    @property
    def root_device(self) -> torch.device:
        if self._device is None:
            self._device = self.accelerator.device_for(0, self.device_ids) if self.accelerator else torch.device("cpu")
        return self._device
