"""``lightning.fabric`` names in the zero-edit mode, and Fabric's one-process behaviour and refusals (in process)."""

from __future__ import annotations

import os

import pytest
import torch

from trainer.lightning_compat import LightningAttributeError, LightningImportError, install, uninstall


@pytest.fixture
def compat():
    install(children=False)
    yield
    uninstall()


def test_names_trainer_projects_import_are_served_by_relay(compat):
    import lightning as L
    from lightning.fabric import Fabric, is_wrapped, seed_everything
    from lightning.fabric.accelerators import CPUAccelerator, CUDAAccelerator, MPSAccelerator, XLAAccelerator
    from lightning.fabric.loggers import CSVLogger, TensorBoardLogger
    from lightning.fabric.plugins.environments import LightningEnvironment, SLURMEnvironment, TorchElasticEnvironment
    from lightning.fabric.strategies import DDPStrategy, FSDPStrategy, ModelParallelStrategy, SingleDeviceStrategy
    from lightning.fabric.utilities import measure_flops, rank_zero_only
    from lightning.fabric.utilities.apply_func import convert_tensors_to_scalars, move_data_to_device
    from lightning.fabric.utilities.cloud_io import get_filesystem
    from lightning.fabric.utilities.data import has_len, suggested_max_num_workers
    from lightning.fabric.utilities.rank_zero import rank_zero_info, rank_zero_warn
    from lightning.fabric.utilities.throughput import Throughput
    from lightning.fabric.utilities.types import _PATH
    from lightning_fabric import Fabric as StandaloneFabric

    import trainer.fabric
    from plugins.environments.local import LocalEnvironment
    from plugins.strategies.fsdp import FSDPStrategy as RelayFSDP

    assert Fabric is L.Fabric is StandaloneFabric is trainer.fabric.Fabric
    assert issubclass(FSDPStrategy, RelayFSDP) and LightningEnvironment is LocalEnvironment  # Lightning's arguments
    assert seed_everything(5) == 5 and not is_wrapped(torch.nn.Linear(1, 1))
    assert not XLAAccelerator.is_available() and XLAAccelerator.auto_device_count() == 0
    assert CPUAccelerator.auto_device_count() == 1
    assert CUDAAccelerator.auto_device_count() == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert MPSAccelerator.auto_device_count() in (0, 1)
    with pytest.raises(ModuleNotFoundError, match=r"Requirement 'torch_xla>=1.13' not met"):
        XLAAccelerator()  # what Lightning raises without torch_xla
    assert type(get_filesystem("memory://x")).__name__ == "MemoryFileSystem"
    assert convert_tensors_to_scalars({"a": torch.tensor(2.5)}) == {"a": 2.5}
    assert has_len([1]) and suggested_max_num_workers(1) >= 1
    assert measure_flops(torch.nn.Linear(4, 3, bias=False), lambda: torch.nn.Linear(4, 3, bias=False)(torch.ones(2, 4))) \
        == 2 * 2 * 4 * 3
    assert {SingleDeviceStrategy, DDPStrategy, ModelParallelStrategy, SLURMEnvironment, TorchElasticEnvironment,
            CSVLogger, TensorBoardLogger, rank_zero_only, rank_zero_info, rank_zero_warn, move_data_to_device,
            Throughput, _PATH}


def test_a_lightning_name_relay_lacks_is_one_line(compat, monkeypatch):
    import lightning.fabric.utilities.distributed as distributed  # every Lightning module imports

    from trainer.lightning_compat import surface

    # every lightning.fabric name is served now: a name Lightning would define there and Relay lacks, made up
    names = surface.module("lightning.fabric.utilities.distributed")["names"]
    monkeypatch.setitem(names, "_not_in_relay", {"kind": "function"})
    with pytest.raises(LightningAttributeError) as raised:
        distributed._not_in_relay  # noqa: B018
    message = str(raised.value)
    assert message.startswith("lightning.fabric.utilities.distributed._not_in_relay is not provided") \
        and "\n" not in message
    with pytest.raises(LightningImportError, match="No module named 'lightning.fabric.no_such_module'"):
        import lightning.fabric.no_such_module  # noqa: F401


def test_fabric_loggers_take_fabrics_root_dir(tmp_path):
    from trainer.fabric.loggers import CSVLogger

    logger = CSVLogger(root_dir=tmp_path, name="run")
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")
    assert (tmp_path / "run" / "version_0" / "metrics.csv").is_file()
    assert logger.root_dir == str(tmp_path) and logger.log_dir == str(tmp_path / "run" / "version_0")


def test_fabric_loggers_keep_root_dir_as_given_and_expand_the_log_dir():
    """Lightning Fabric's ``root_dir`` is the folder given (``~`` not expanded); ``log_dir`` is the real path."""
    from trainer.fabric.loggers import TensorBoardLogger

    logger = TensorBoardLogger("~/runs", name="name", version="version", sub_dir="sub")
    assert logger.root_dir == "~/runs"
    assert logger.log_dir == os.path.join(os.path.expanduser("~/runs"), "name", "version", "sub")


def test_throughput_rates_over_the_window():
    from trainer.fabric.utilities.throughput import Throughput

    throughput = Throughput(window_size=3, world_size=2, available_flops=100.0)
    for i in range(4):
        throughput.update(time=float(i), batches=i, samples=8 * i, lengths=80 * i, flops=10)
    rates = throughput.compute()
    assert rates["device/samples_per_sec"] == 8.0 and rates["samples_per_sec"] == 16.0
    assert rates["device/items_per_sec"] == 80.0 and rates["device/flops_per_sec"] == 10.0
    assert rates["device/mfu"] == 0.1
    with pytest.raises(ValueError, match="running totals"):
        throughput.update(time=5.0, batches=5, samples=1)


def test_a_strategy_fabric_cannot_drive_is_one_clear_line():
    from trainer.fabric import Fabric

    with pytest.raises(ValueError, match=r"^Fabric\(strategy='pipeline'\) is not supported: .*use Trainer"):
        Fabric(accelerator="cpu", devices=1, strategy="pipeline")


def test_deepspeed_under_fabric_sets_model_and_optimizer_up_together():
    """Relay's DeepSpeed strategy (stage 2 by name, as Lightning's); the loop itself runs in
    tests/distributed/test_fabric_deepspeed.py."""
    from trainer.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1, strategy="deepspeed")
    assert type(fabric.strategy).__name__ == "DeepSpeedStrategy" and fabric.strategy.stage == 2
    with pytest.raises(RuntimeError, match=r"^The `DeepSpeedStrategy` requires the model and optimizer\(s\) to be "
                                           r"set up jointly through `.setup\(model, optimizer, ...\)`.$"):
        fabric.setup_optimizers(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1))


def test_one_process_fabric_basics(tmp_path):
    from trainer.fabric import Fabric, is_wrapped

    class Recorder:
        def __init__(self) -> None:
            self.calls: list = []

        def on_epoch(self, epoch):
            self.calls.append(epoch)

    recorder = Recorder()
    fabric = Fabric(accelerator="cpu", devices=1, callbacks=recorder)
    assert fabric.launch(lambda f, x: (f.world_size, x), 7) == (1, 7)
    assert (fabric.global_rank, fabric.local_rank, fabric.node_rank, fabric.is_global_zero) == (0, 0, 0, True)
    fabric.call("on_epoch", epoch=3, unused="dropped")
    assert recorder.calls == [3]
    with fabric.init_module():
        model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapped, opt = fabric.setup(model, optimizer)
    assert is_wrapped(wrapped) and is_wrapped(opt) and isinstance(opt, torch.optim.SGD)
    assert wrapped.weight is model.weight and wrapped.module is model
    with pytest.raises(RuntimeError, match="No models were set up"):
        Fabric(accelerator="cpu", devices=1).backward(torch.ones(()))
    assert fabric.all_gather(3).item() == 3 and fabric.all_reduce({"x": 2.0}, reduce_op="sum")["x"].item() == 2.0
    assert fabric.broadcast("hello") == "hello"
    with fabric.rank_zero_first():
        pass
    torch.save(model.state_dict(), tmp_path / "raw.pt")
    with torch.no_grad():
        model.weight.zero_()
    fabric.load_raw(tmp_path / "raw.pt", wrapped)
    assert model.weight.abs().sum() > 0
    norm = None
    fabric.backward(wrapped(torch.ones(4, 3)).sum())
    norm = fabric.clip_gradients(wrapped, opt, max_norm=1e-3)
    assert norm is not None and norm > 1e-3
    assert torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()])) <= 1e-3 + 1e-6


def test_model_parallel_without_a_tensor_parallel_plan_is_one_clear_line():
    from plugins.strategies.model_parallel import ModelParallelStrategy
    from trainer.fabric.fabric import _check_tensor_parallel_plan

    with pytest.raises(ValueError, match=r"tensor_parallel_size=2: Linear has no tensor-parallel plan applied"):
        _check_tensor_parallel_plan(ModelParallelStrategy(tensor_parallel_size=2), torch.nn.Linear(2, 2))
    _check_tensor_parallel_plan(ModelParallelStrategy(tensor_parallel_size=1), torch.nn.Linear(2, 2))  # FSDP only
