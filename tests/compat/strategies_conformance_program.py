"""Lightning's strategy, precision and Fabric plugin calls, observed the same way on both frameworks.

``python strategies_conformance_program.py lightning|relay`` runs every check in one process and emits one JSON dict
(tests/compat/lightning_diff/harness.py); on ``relay`` the zero-edit mode is installed before the first
``import lightning``. tests/compat/test_conformance_strategies.py compares the two. Everything here runs in one
process on the CPU: the objects are built and called, no process group is started.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock
from unittest.mock import MagicMock, Mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import torch  # noqa: E402
from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel, MixedPrecision, ShardingStrategy  # noqa: E402

from lightning.fabric import Fabric  # noqa: E402
from lightning.fabric.plugins import HalfPrecision  # noqa: E402
from lightning.fabric.plugins.precision.fsdp import FSDPPrecision  # noqa: E402
from lightning.fabric.strategies import FSDPStrategy, ModelParallelStrategy, SingleDeviceStrategy  # noqa: E402
from lightning.pytorch.accelerators import CPUAccelerator  # noqa: E402
from lightning.pytorch.plugins import MixedPrecision as TrainerMixedPrecision  # noqa: E402
from lightning.pytorch.plugins.precision.fsdp import FSDPPrecision as TrainerFSDPPrecision  # noqa: E402
from lightning.pytorch.plugins.precision.precision import Precision as TrainerPrecision  # noqa: E402
from lightning.pytorch.strategies import FSDPStrategy as TrainerFSDPStrategy  # noqa: E402
from lightning.pytorch.strategies import ModelParallelStrategy as TrainerModelParallelStrategy  # noqa: E402
from lightning.pytorch.strategies import SingleDeviceStrategy as TrainerSingleDeviceStrategy  # noqa: E402

TMP = Path(tempfile.mkdtemp(prefix="strategies-conformance-"))


def raised(fn, pattern: str) -> list:
    """``[exception type, whether Lightning's words (a regex) are in its message]``, or ``["no exception"]``."""
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the exception is the observation
        return [type(err).__name__, bool(re.search(pattern, str(err)))]
    return ["no exception"]


def check_fsdp_arguments():
    out = {}
    for label, cls in (("fabric", FSDPStrategy), ("pytorch", TrainerFSDPStrategy)):
        config = MixedPrecision(param_dtype=torch.bfloat16)
        out[label] = {
            "default": cls().sharding_strategy is ShardingStrategy.FULL_SHARD,
            "names": [cls(sharding_strategy=s).sharding_strategy.name
                      for s in ("no_shard", "SHARD_GRAD_OP", ShardingStrategy.FULL_SHARD)],
            "cpu_offload": [cls(cpu_offload=True).cpu_offload == CPUOffload(offload_params=True),
                            cls(cpu_offload=CPUOffload()).cpu_offload == CPUOffload()],
            "mixed_precision": cls(mixed_precision=config).mixed_precision_config == config,
            "hybrid_without_policy": raised(lambda c=cls: c(sharding_strategy="HYBRID_SHARD"), "requires you to pass"),
        }
    trainer_side = TrainerFSDPStrategy  # the Trainer side's FullyShardedDataParallel arguments are public
    out["pytorch"]["kwargs"] = [trainer_side().kwargs["use_orig_params"],
                                trainer_side(use_orig_params=False).kwargs["use_orig_params"],
                                list(trainer_side(device_mesh=(1, 2)).kwargs["device_mesh"])]
    return out


def check_fsdp_refusals():
    strategy, trainer_strategy = FSDPStrategy(), TrainerFSDPStrategy()
    fsdp1 = Mock(spec=FullyShardedDataParallel)
    fsdp1.modules.return_value = [fsdp1]

    def assign(target, name):
        return lambda: setattr(target, name, HalfPrecision())

    return {
        "precision": raised(lambda: FSDPStrategy(precision=HalfPrecision()), "can only work with the `FSDPPrecision"),
        "precision_set": raised(assign(strategy, "precision"), "can only work with the `FSDPPrecision"),
        "precision_plugin_set": raised(assign(trainer_strategy, "precision_plugin"),
                                       "can only work with the `FSDPPrecision"),
        "storage_options": raised(lambda: strategy.save_checkpoint(path=TMP, state={}, storage_options=1),
                                  re.escape("FSDPStrategy.save_checkpoint(..., storage_options=...)` is not")),
        "trainer_storage_options": raised(
            lambda: trainer_strategy.save_checkpoint(checkpoint={}, filepath=TMP, storage_options=1),
            re.escape("FSDPStrategy.save_checkpoint(..., storage_options=...)` is not")),
        "save_without_model": raised(lambda: strategy.save_checkpoint(path=TMP, state={"m": torch.nn.Linear(1, 1)}),
                                     "Could not find a FSDP model in the provided checkpoint state"),
        "save_two_models": raised(lambda: strategy.save_checkpoint(path=TMP, state={"a": fsdp1, "b": fsdp1}),
                                  "Found multiple FSDP models in the given state"),
        "load_no_state": raised(lambda: strategy.load_checkpoint(path=TMP, state=None),
                                re.escape("Got FSDPStrategy.load_checkpoint(..., state=None")),
        "load_optimizer": raised(lambda: strategy.load_checkpoint(path=TMP, state=Mock(spec=torch.optim.Optimizer)),
                                 "Loading a single optimizer object from a checkpoint is not supported"),
        "load_raw_from_folder": raised(lambda: strategy.load_checkpoint(path=TMP, state=Mock(spec=torch.nn.Module)),
                                       "must be a single file containing the full state dict"),
        "load_unknown_layout": raised(lambda: strategy.load_checkpoint(path=TMP, state={"model": fsdp1}),
                                      "does not point to a valid checkpoint"),
        "clip_unsharded": raised(lambda: strategy.clip_gradients_norm(torch.nn.Linear(1, 1), Mock(), 1.0),
                                 "only possible if the module.*is wrapped in `FullyShardedDataParallel`"),
    }


def check_model_parallel():
    strategy = ModelParallelStrategy(parallelize_fn=lambda m, _: m)
    fsdp1_inside = Mock(modules=Mock(return_value=[Mock(spec=FullyShardedDataParallel)]))
    return {
        "mesh_before_setup": raised(lambda: strategy.device_mesh, "Accessing the device mesh .* not allowed"),
        "trainer_mesh_before_setup": raised(lambda: TrainerModelParallelStrategy().device_mesh,
                                            "Accessing the device mesh .* not allowed"),
        "fsdp1_module": raised(lambda: strategy.setup_module(fsdp1_inside), "only supports the new FSDP2 APIs"),
        "storage_options": raised(lambda: strategy.save_checkpoint(path=TMP, state={}, storage_options=1),
                                  re.escape("ModelParallelStrategy.save_checkpoint(..., storage_options=...)` is")),
        "load_no_state": raised(lambda: strategy.load_checkpoint(path=TMP, state={}),
                                re.escape("Got ModelParallelStrategy.load_checkpoint(..., state={})")),
    }


def check_model_parallel_mesh():
    """The mesh ``parallelize_fn`` receives (one process: the group is real, of size one)."""
    seen = {}

    def parallelize(module, mesh):
        seen["mesh"] = [list(mesh.mesh_dim_names), list(mesh.shape)]
        return module

    fabric = Fabric(accelerator="cpu", devices=1, strategy=ModelParallelStrategy(parallelize_fn=parallelize))
    fabric.launch()
    fabric.setup(torch.nn.Linear(2, 2))
    seen["sampler"] = fabric.strategy.distributed_sampler_kwargs
    torch.distributed.destroy_process_group()
    return seen


def check_fabric_calls():
    out = {}
    with mock.patch.dict(os.environ, {"LT_CLI_USED": "1"}):
        out["launch_after_cli"] = raised(lambda: Fabric(devices=1).launch(),
                                         re.escape("Calling  `.launch()` again is not allowed"))

        class FabricWithRun(Fabric):
            def run(self):
                pass

        out["run_with_cli"] = raised(FabricWithRun, re.escape("Overriding `Fabric.run()` and launching from the CLI"))
    out["launch_none"] = raised(lambda: Fabric(devices=1).launch(None), "needs to be a callable")
    with mock.patch.dict(os.environ, {}, clear=True):
        Fabric.seed_everything(3)
        loader = Fabric(devices=1).setup_dataloaders(torch.utils.data.DataLoader(range(4)))
        out["seed_environment"] = [dict(os.environ), loader.worker_init_fn.func.__name__]

    fabric = Fabric(accelerator="cpu", devices=1)
    fabric.strategy.load_checkpoint = Mock(return_value={"rest": 1})
    fabric.strategy.clip_gradients_norm = Mock()
    fabric.strategy.clip_gradients_value = Mock()
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapped, wrapped_optimizer = fabric.setup(model, optimizer)
    out["load_returns"] = fabric.load("anywhere.ckpt", weights_only=True)
    load_call = fabric.strategy.load_checkpoint.call_args
    fabric.load_raw("raw.pt", wrapped, strict=False)
    raw_call = fabric.strategy.load_checkpoint.call_args
    out["load_calls"] = [sorted(load_call.kwargs.items()), [raw_call.kwargs["state"] is model,
                                                            raw_call.kwargs["strict"], raw_call.kwargs["path"]]]
    fabric.backward(wrapped(torch.ones(1, 2)).sum())
    fabric.clip_gradients(wrapped, wrapped_optimizer, clip_val=0.5)
    fabric.clip_gradients(wrapped, wrapped_optimizer, max_norm=2)
    value_call = fabric.strategy.clip_gradients_value.call_args
    norm_call = fabric.strategy.clip_gradients_norm.call_args
    out["clip_calls"] = [value_call.args[0] is model, value_call.args[1] is optimizer, value_call.kwargs,
                         norm_call.args[0] is model, norm_call.args[1] is optimizer, norm_call.kwargs]

    fabric = Fabric(accelerator="cpu", devices=1)
    model = torch.nn.Linear(2, 2)
    path = TMP / "filtered.ckpt"
    fabric.save(path, {"model": model, "step": 3, "meta": {"a": 1, "b": "x"}},
                filter={"model": lambda k, v: False, "step": lambda k, v: False,
                        "meta": lambda k, v: isinstance(v, int)})
    saved = torch.load(path, weights_only=True)
    out["filtered_save"] = {k: v for k, v in saved.items()}
    fabric.strategy.checkpoint_io = io = Mock()  # an object with the CheckpointIO methods only
    fabric.save(path, {"step": 4})
    out["checkpoint_io_call"] = [io.save_checkpoint.call_args.kwargs["checkpoint"],
                                 io.save_checkpoint.call_args.kwargs["path"] == path,
                                 io.save_checkpoint.call_args.kwargs["storage_options"]]
    return out


def check_precision_plugins():
    scaled = FSDPPrecision("16-mixed")
    out = {"default_scaler": type(scaled.scaler).__name__, "bf16_scaler": FSDPPrecision("bf16-mixed").scaler}
    scaled.scaler = Mock(scale=Mock(side_effect=lambda x: x))
    tensor = Mock()
    scaled.backward(tensor, Mock(), "arg", keyword=1)
    out["fabric_backward"] = [scaled.scaler.scale.call_count, list(tensor.backward.call_args.args),
                              tensor.backward.call_args.kwargs]
    optimizer = Mock()
    scaled.optimizer_step(optimizer, keyword=2)
    out["fabric_step"] = [scaled.scaler.step.call_args.kwargs, scaled.scaler.update.call_count]
    plain, optimizer = FSDPPrecision("bf16-mixed"), Mock()
    plain.optimizer_step(optimizer, keyword=3)
    out["fabric_step_no_scaler"] = optimizer.step.call_args.kwargs

    trainer_side = TrainerFSDPPrecision("16-mixed")
    trainer_side.scaler = Mock(scale=Mock(side_effect=lambda x: x))
    model, tensor = Mock(trainer=Mock(callbacks=[], profiler=MagicMock())), Mock()
    trainer_side.pre_backward(tensor, model)
    trainer_side.backward(tensor, model, None, "arg", keyword=4)
    out["trainer_backward"] = [trainer_side.scaler.scale.call_count, model.backward.call_args.args[1:],
                               model.backward.call_args.kwargs]
    trainer_side.optimizer_step(Mock(), model, Mock(return_value=1.0), keyword=5)
    out["trainer_step"] = [trainer_side.scaler.step.call_args.kwargs, trainer_side.scaler.update.call_count]

    amp = TrainerMixedPrecision(precision="16-mixed", device="cuda:0", scaler=Mock())
    amp.clip_grad_by_value, amp.clip_grad_by_norm = Mock(), Mock()
    amp.clip_gradients(Mock(spec=torch.optim.Optimizer))
    amp.clip_gradients(Mock(spec=torch.optim.Optimizer), clip_val=1.0, gradient_clip_algorithm="value")
    out["amp_clip"] = [amp.clip_grad_by_value.call_count, amp.clip_grad_by_norm.call_count]
    out["fused_clip"] = raised(lambda: amp.clip_gradients(Mock(_step_supports_amp_scaling=True), clip_val=1.0),
                               "does not allow for gradient clipping")
    return out


def check_single_device():
    strategy = SingleDeviceStrategy(device="cpu")
    trainer_strategy = TrainerSingleDeviceStrategy(accelerator=CPUAccelerator(), device=torch.device("cpu"),
                                                   precision_plugin=TrainerPrecision())
    tensor = torch.ones(2, 3)
    return {"all_gather_shape": list(strategy.all_gather(tensor).shape),
            "all_reduce_same": strategy.all_reduce(tensor) is tensor,
            "restore_after_setup": trainer_strategy.restore_checkpoint_after_setup,
            "cpu_stats": sorted(CPUAccelerator().get_device_stats("cpu"))}


CHECKS = [check_fsdp_arguments, check_fsdp_refusals, check_model_parallel, check_model_parallel_mesh, check_fabric_calls,
          check_precision_plugins, check_single_device]


def main() -> None:
    run_checks(CHECKS)


if __name__ == "__main__":
    main()
