"""Lightning's XLA (TPU) pieces, as Lightning behaves on a machine without ``torch_xla``: they import, the
availability checks say no, and constructing one raises ``ModuleNotFoundError`` naming the requirement.

Relay has no XLA backend, so with ``torch_xla`` installed the constructors still raise (a ``RuntimeError`` saying
so) rather than half-run. Only the constructors and the class-level queries exist: no instance can be made.
"""

from __future__ import annotations

from typing import Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.checkpoint_io import TorchCheckpointIO
from plugins.environments.base import ClusterEnvironment
from plugins.precision.base import Precision
from plugins.strategies.parallel import ParallelStrategy
from plugins.strategies.single_device import SingleDeviceStrategy
from trainer.lightning_compat.impl.requirements import XLA, require
from trainer.profilers.base import Profiler


def _refuse() -> None:
    require(XLA)
    raise RuntimeError("Relay has no XLA backend: torch_xla is installed but Relay cannot run on it; use "
                       "accelerator='cuda', 'cpu' or 'auto'.")


class XLAAccelerator(Accelerator):
    """Lightning Fabric's TPU accelerator: never available here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()

    @staticmethod
    def parse_devices(devices: int | str | list[int]) -> int | list[int]:
        _refuse()
        return 0

    @staticmethod
    def get_parallel_devices(devices: int | list[int]) -> list[torch.device]:
        _refuse()
        return []

    @staticmethod
    def auto_device_count() -> int:
        return 0

    @staticmethod
    def is_available() -> bool:
        return False

    @classmethod
    def name(cls) -> str:
        return "tpu"

    @classmethod
    def register_accelerators(cls, accelerator_registry: Any) -> None:
        """Lightning registers "tpu" here; Relay's registry has no XLA entry to add."""


class TrainerXLAAccelerator(XLAAccelerator):
    """``lightning.pytorch.accelerators.XLAAccelerator`` (a subclass of Fabric's, as in Lightning)."""

    def get_device_stats(self, device: Any) -> dict[str, Any]:
        _refuse()
        return {}


class XLAStrategy(ParallelStrategy):
    def __init__(self, accelerator: Any = None, parallel_devices: Any = None, checkpoint_io: Any = None,
                 precision: Any = None, sync_module_states: bool = True) -> None:
        _refuse()

    @classmethod
    def register_strategies(cls, strategy_registry: Any) -> None:
        """Lightning registers "xla" here; Relay's registry has no XLA entry to add."""


class TrainerXLAStrategy(ParallelStrategy):
    def __init__(self, accelerator: Any = None, parallel_devices: Any = None, checkpoint_io: Any = None,
                 precision_plugin: Any = None, debug: bool = False, sync_module_states: bool = True,
                 **_: Any) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class XLAFSDPStrategy(ParallelStrategy):
    def __init__(self, accelerator: Any = None, parallel_devices: Any = None, checkpoint_io: Any = None,
                 precision: Any = None, auto_wrap_policy: Any = None, activation_checkpointing_policy: Any = None,
                 state_dict_type: str = "sharded", sequential_save: bool = False, **kwargs: Any) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class SingleDeviceXLAStrategy(SingleDeviceStrategy):
    def __init__(self, device: Any, accelerator: Any = None, checkpoint_io: Any = None,
                 precision: Any = None) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class TrainerSingleDeviceXLAStrategy(SingleDeviceStrategy):
    def __init__(self, device: Any, accelerator: Any = None, checkpoint_io: Any = None, precision_plugin: Any = None,
                 debug: bool = False) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class XLAPrecision(Precision):
    def __init__(self, precision: str) -> None:
        _refuse()


class TrainerXLAPrecision(Precision):
    def __init__(self, precision: str = "32-true") -> None:
        _refuse()


class XLAEnvironment(ClusterEnvironment):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()

    @staticmethod
    def detect() -> bool:
        return False

    # ClusterEnvironment's abstract methods; no instance can exist to call them
    creates_processes_externally = main_address = main_port = property(lambda self: _refuse())  # type: ignore

    def world_size(self) -> int:
        _refuse()
        return 0

    def set_world_size(self, size: int) -> None:
        _refuse()

    def global_rank(self) -> int:
        _refuse()
        return 0

    def set_global_rank(self, rank: int) -> None:
        _refuse()

    def local_rank(self) -> int:
        _refuse()
        return 0

    def node_rank(self) -> int:
        _refuse()
        return 0


class XLACheckpointIO(TorchCheckpointIO):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()


class XLAProfiler(Profiler):
    def __init__(self, port: int = 9012) -> None:
        _refuse()


class _XLALauncher:
    def __init__(self, strategy: Any) -> None:
        _refuse()


def _using_pjrt() -> bool:
    """Whether XLA runs on the PJRT runtime (Lightning's check); never, without torch_xla."""
    return False


def _parse_tpu_devices(devices: int | str | list[int]) -> int | list[int]:
    _refuse()
    return 0
