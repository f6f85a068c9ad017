"""``trainer.strategies``: Relay's strategy plugins under Lightning's path (``lightning.pytorch.strategies``)."""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "Strategy": "plugins.strategies.base",
    "SingleDeviceStrategy": "plugins.strategies.single_device",
    "ParallelStrategy": "plugins.strategies.parallel",
    "DDPStrategy": "plugins.strategies.ddp",
    "FSDPStrategy": "plugins.strategies.fsdp",
    "ModelParallelStrategy": "plugins.strategies.model_parallel",
    "DDPSpawnStrategy": "plugins.strategies.ddp_spawn",
    "DeepSpeedStrategy": "plugins.strategies.deepspeed",
    "HorovodStrategy": "plugins.strategies.horovod",
    "STRATEGY_REGISTRY": "trainer.fabric.registries",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
