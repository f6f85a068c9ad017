"""Lightning's XLA (TPU) pieces, as Lightning behaves on a machine without ``torch_xla``: they import, the
availability checks say no, and constructing one raises ``ModuleNotFoundError`` naming the requirement.

Relay has no XLA backend, so with ``torch_xla`` installed the constructors still raise (a ``RuntimeError`` saying
so) rather than half-run. Only the constructors and the class-level queries exist: no instance can be made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, Optional, Union

import torch

from plugins.accelerators.base import Accelerator
from plugins.checkpoint_io import TorchCheckpointIO
from plugins.environments.base import ClusterEnvironment
from plugins.precision.base import Precision
from plugins.strategies.parallel import ParallelStrategy
from plugins.strategies.single_device import SingleDeviceStrategy
from trainer.lightning_compat.impl.requirements import XLA, require
from trainer.profilers.base import Profiler

if TYPE_CHECKING:
    from trainer.fabric.registries import AcceleratorRegistry as _AcceleratorRegistry
    from trainer.fabric.registries import StrategyRegistry as _StrategyRegistry
    from trainer.fabric.utilities.types import _DEVICE
    from trainer.lightning_compat.impl.fabric_strategy_options import _POLICY_SET
    from trainer.lightning_compat.impl.fabric_strategy_options import _XLA_POLICY as _POLICY
    from trainer.lightning_compat.impl.loops_plugins import _WrappingCheckpointIO


def _refuse() -> NoReturn:
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
    def register_accelerators(cls, accelerator_registry: _AcceleratorRegistry) -> None:
        """Lightning registers "tpu" here; Relay's registry has no XLA entry to add."""


class TrainerXLAAccelerator(XLAAccelerator):
    """``lightning.pytorch.accelerators.XLAAccelerator`` (a subclass of Fabric's, as in Lightning)."""

    def get_device_stats(self, device: _DEVICE) -> dict[str, Any]:
        _refuse()
        return {}


class XLAStrategy(ParallelStrategy):
    def __init__(self, accelerator: Optional[Accelerator] = None, parallel_devices: Optional[list[torch.device]] = None,
                 checkpoint_io: Optional[XLACheckpointIO] = None, precision: Optional[XLAPrecision] = None,
                 sync_module_states: bool = True) -> None:
        _refuse()

    @classmethod
    def register_strategies(cls, strategy_registry: _StrategyRegistry) -> None:
        """Lightning registers "xla" here; Relay's registry has no XLA entry to add."""


class TrainerXLAStrategy(ParallelStrategy):
    def __init__(self, accelerator: Optional[Accelerator] = None, parallel_devices: Optional[list[torch.device]] = None,
                 checkpoint_io: Optional[Union[XLACheckpointIO, _WrappingCheckpointIO]] = None,
                 precision_plugin: Optional[TrainerXLAPrecision] = None, debug: bool = False,
                 sync_module_states: bool = True, **_: Any) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class XLAFSDPStrategy(ParallelStrategy):
    def __init__(self, accelerator: Optional[Accelerator] = None, parallel_devices: Optional[list[torch.device]] = None,
                 checkpoint_io: Optional[XLACheckpointIO] = None, precision: Optional[XLAPrecision] = None,
                 auto_wrap_policy: Optional[_POLICY] = None,
                 activation_checkpointing_policy: Optional[_POLICY_SET] = None,
                 state_dict_type: str = "sharded", sequential_save: bool = False, **kwargs: Any) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class SingleDeviceXLAStrategy(SingleDeviceStrategy):
    def __init__(self, device: _DEVICE, accelerator: Optional[Accelerator] = None,
                 checkpoint_io: Optional[XLACheckpointIO] = None, precision: Optional[XLAPrecision] = None) -> None:
        _refuse()

    register_strategies = XLAStrategy.register_strategies


class TrainerSingleDeviceXLAStrategy(SingleDeviceStrategy):
    def __init__(self, device: _DEVICE, accelerator: Optional[Accelerator] = None,
                 checkpoint_io: Optional[Union[XLACheckpointIO, _WrappingCheckpointIO]] = None,
                 precision_plugin: Optional[TrainerXLAPrecision] = None, debug: bool = False) -> None:
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
    def __init__(self, strategy: Union[XLAStrategy, XLAFSDPStrategy, TrainerXLAStrategy]) -> None:
        _refuse()


def _using_pjrt() -> bool:
    """Whether XLA runs on the PJRT runtime (Lightning's check); never, without torch_xla."""
    return False


def _parse_tpu_devices(devices: int | str | list[int]) -> int | list[int]:
    _refuse()
    return 0
