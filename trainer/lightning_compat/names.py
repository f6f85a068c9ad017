"""Lightning names served one at a time: ``"lightning module:name" -> "relay module:attr"``.

Keyed by the Lightning module that *defines* the name (the walk records the packages that re-export it, and
those follow here). Also Relay's own extras under a Lightning package (``DDPSpawnStrategy``, ``ROCmAccelerator``).
"""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"

_ACCELERATORS = {"accelerator": "Accelerator:plugins.accelerators.base", "cpu": "CPUAccelerator:plugins.accelerators.cpu",
                 "cuda": "CUDAAccelerator:plugins.accelerators.cuda", "mps": "MPSAccelerator:plugins.accelerators.mps"}
_STRATEGIES = {"strategy": "Strategy:plugins.strategies.base", "single_device": "SingleDeviceStrategy:plugins.strategies.single_device",
               "parallel": "ParallelStrategy:plugins.strategies.parallel", "ddp": "DDPStrategy:plugins.strategies.ddp",
               "fsdp": "FSDPStrategy:plugins.strategies.fsdp", "deepspeed": "DeepSpeedStrategy:plugins.strategies.deepspeed",
               "model_parallel": "ModelParallelStrategy:plugins.strategies.model_parallel"}


def _each(root: str, package: str, table: dict[str, str]) -> dict[str, str]:
    out = {}
    for module, spec in table.items():
        name, _, relay = spec.partition(":")
        out[f"{root}.{package}.{module}:{name}"] = f"{relay}:{name}"
    return out


NAMES: dict[str, str] = {
    f"{_P}.core.module:LightningModule": "trainer.module:Module",
    f"{_P}.core.datamodule:LightningDataModule": "trainer.datamodule:DataModule",
    **_each(_P, "accelerators", _ACCELERATORS),
    **_each(_F, "accelerators", _ACCELERATORS),
    f"{_F}.accelerators.cuda:find_usable_cuda_devices": "plugins.accelerators.usable_cuda:find_usable_cuda_devices",
    f"{_P}.accelerators:ROCmAccelerator": "plugins.accelerators.rocm:ROCmAccelerator",
    f"{_P}.accelerators:XPUAccelerator": "plugins.accelerators.xpu:XPUAccelerator",
    **_each(_P, "strategies", _STRATEGIES),
    **_each(_F, "strategies", _STRATEGIES),
    f"{_P}.strategies:DDPSpawnStrategy": "plugins.strategies.ddp_spawn:DDPSpawnStrategy",
    f"{_P}.strategies:HorovodStrategy": "plugins.strategies.horovod:HorovodStrategy",
    f"{_F}.strategies:DDPSpawnStrategy": "plugins.strategies.ddp_spawn:DDPSpawnStrategy",
    f"{_F}.strategies:HorovodStrategy": "plugins.strategies.horovod:HorovodStrategy",
    f"{_F}.strategies.registry:_StrategyRegistry": "trainer.fabric.registries:StrategyRegistry",
    f"{_F}.strategies:STRATEGY_REGISTRY": "trainer.fabric.registries:STRATEGY_REGISTRY",
}
