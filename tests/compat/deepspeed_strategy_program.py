"""``DeepSpeedStrategy`` as Lightning code builds and calls it, without starting an engine: its signature, the
DeepSpeed config its arguments make, and its refusals (Lightning's API reference for ``DeepSpeedStrategy`` and
Fabric's ``save_checkpoint`` / ``load_checkpoint``).

``python deepspeed_strategy_program.py lightning|relay``; Relay runs in the zero-edit mode, so both import the class
from ``lightning.fabric.strategies`` and ``lightning.pytorch.strategies``. Prints one JSON object
(tests/compat/lightning_diff/harness.py).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import warnings
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.compat.lightning_diff.common import exception
from tests.compat.lightning_diff.harness import emit

CASES = {
    "defaults": {},
    "offload_optimizer": {"offload_optimizer": True},
    "stage_3_nvme": {"stage": 3, "offload_optimizer": True, "offload_parameters": True, "remote_device": "nvme",
                     "offload_params_device": "nvme", "offload_optimizer_device": "nvme", "nvme_path": "/fast",
                     "pin_memory": True, "params_buffer_count": 3, "max_in_cpu": 7},
    "no_zero": {"zero_optimization": False, "logging_batch_size_per_gpu": 4},
    "tuned": {"stage": 1, "contiguous_gradients": False, "overlap_comm": False, "allgather_partitions": False,
              "reduce_scatter": False, "allgather_bucket_size": 5, "reduce_bucket_size": 6, "sub_group_size": 8,
              "zero_allow_untested_optimizer": False, "block_size": 1, "queue_depth": 2, "single_submit": True,
              "overlap_events": False, "thread_count": 3},
    "activations": {"partition_activations": True, "cpu_checkpointing": True, "contiguous_memory_optimization": True,
                    "synchronize_checkpoint_boundary": True},
    "given_config": {"config": {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 2}, "stage": 1},
}
ATTRIBUTES = ("remote_device", "load_full_weights", "exclude_frozen_parameters", "loss_scale", "initial_scale_power",
              "loss_scale_window", "hysteresis", "min_loss_scale", "zero_stage_3")


def refusal(call) -> dict:
    try:
        call()
    except Exception as err:  # noqa: BLE001 (what a user's except clause sees)
        return exception(err)
    return {"exception": None}


def main(framework: str) -> None:
    warnings.filterwarnings("ignore")
    from plugins.strategies.deepspeed_checkpoint import mlflow_on_first_use

    with mlflow_on_first_use():  # DeepSpeed's import without MLflow's (~2.4 s), for either framework
        import deepspeed  # noqa: F401
    if framework == "relay":
        from trainer.lightning_compat import install

        install(children=False)
    from lightning.fabric.accelerators import CUDAAccelerator
    from lightning.fabric.strategies import DeepSpeedStrategy
    from lightning.pytorch.strategies import DeepSpeedStrategy as TrainerDeepSpeedStrategy

    result: dict = {"signature": {}, "configs": {}, "attributes": {}, "refusals": {}}
    for name, cls in (("fabric", DeepSpeedStrategy), ("pytorch", TrainerDeepSpeedStrategy)):
        parameters = inspect.signature(cls.__init__).parameters.values()
        result["signature"][name] = [[p.name, repr(p.default)] for p in parameters
                                     if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"]
    for name, kwargs in CASES.items():
        strategy = DeepSpeedStrategy(**kwargs)
        result["configs"][name] = json.loads(json.dumps(strategy.config))
        result["attributes"][name] = {a: getattr(strategy, a) for a in ATTRIBUTES}
    from lightning.fabric.strategies import STRATEGY_REGISTRY

    for name in ("deepspeed", *(f"deepspeed_stage_{s}" for s in (1, 2, 3)),
                 *(f"deepspeed_stage_{s}_offload" for s in (1, 2, 3)), "deepspeed_stage_3_offload_nvme"):
        preset = STRATEGY_REGISTRY.get(name)  # Lightning's named presets: Fabric(strategy=name)
        result["configs"][f"registry_{name}"] = preset.config
        result["attributes"][f"registry_{name}"] = {a: getattr(preset, a) for a in ATTRIBUTES}
    Path("ds.json").write_text(json.dumps({"zero_optimization": {"stage": 1}}))
    os.environ["PL_DEEPSPEED_CONFIG_PATH"] = "ds.json"
    result["configs"]["from_environment"] = DeepSpeedStrategy().config
    del os.environ["PL_DEEPSPEED_CONFIG_PATH"]

    strategy = DeepSpeedStrategy()
    Path("plain").mkdir()
    Path("ckpt/checkpoint").mkdir(parents=True)
    Path("ckpt/checkpoint/shard.pt").touch()
    calls = {
        "missing_config_file": lambda: DeepSpeedStrategy(config="missing.json"),
        "trainer_missing_config_file": lambda: TrainerDeepSpeedStrategy(config="missing.json"),
        "save_storage_options": lambda: strategy.save_checkpoint("out", state={}, storage_options={}),
        "save_filter": lambda: strategy.save_checkpoint("out", state={}, filter={}),
        "save_without_engine": lambda: strategy.save_checkpoint("out", state={"model": mock.MagicMock()}),
        "load_without_state": lambda: strategy.load_checkpoint("plain", state=None),
        "load_empty_state": lambda: strategy.load_checkpoint("plain", state={}),
        "load_not_a_checkpoint": lambda: strategy.load_checkpoint("plain", state={"model": mock.Mock()}),
        "load_subfolder": lambda: strategy.load_checkpoint("ckpt/checkpoint", state={"model": mock.Mock()}),
        "load_file_inside": lambda: strategy.load_checkpoint("ckpt/checkpoint/shard.pt", state={"model": mock.Mock()}),
        "load_without_engine": lambda: strategy.load_checkpoint("ckpt", state={"model": mock.Mock()}),
        "setup_optimizer": lambda: strategy.setup_optimizer(mock.Mock()),
        "clip_norm": lambda: strategy.clip_gradients_norm(mock.Mock(), mock.Mock(), 1.0),
        "clip_value": lambda: strategy.clip_gradients_value(mock.Mock(), mock.Mock(), 1.0),
    }
    for devices in ([1], [0, 2]):  # DeepSpeed puts each process on the device of its local rank's index
        chosen = DeepSpeedStrategy(accelerator=mock.Mock(spec=CUDAAccelerator),
                                   parallel_devices=[torch.device("cuda", i) for i in devices])
        calls[f"device_indices_{devices}"] = chosen.setup_environment
    result["refusals"] = {name: refusal(call) for name, call in calls.items()}
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1])
