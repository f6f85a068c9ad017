"""An unmodified Lightning Fabric program: a small classifier trained in a loop of its own on 2 CPU processes
started by ``fabric.launch(train)`` (``ddp_spawn``), logging to CSV and TensorBoard, measuring FLOPs and
throughput with Fabric's utilities. Prints one JSON line of what it observed (rank 0's result)."""

import json
import os
import time

import lightning as L
import torch
from lightning.fabric.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator
from lightning.fabric.loggers import CSVLogger, TensorBoardLogger
from lightning.fabric.plugins.environments import LightningEnvironment
from lightning.fabric.utilities import Throughput, measure_flops
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.fabric.utilities.rank_zero import rank_zero_info
from lightning.fabric.utilities.seed import seed_everything
from torch.utils.data import DataLoader, TensorDataset


def make_data():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=generator)
    y = (x[:, :5].sum(dim=1) > 0).long()
    return TensorDataset(x, y)


def train(fabric):
    seed_everything(1234)
    with fabric.rank_zero_first():
        dataset = make_data()
    with fabric.init_module():
        model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    flops = measure_flops(model, lambda: model(torch.randn(32, 10)), lambda out: out.sum())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    model, optimizer = fabric.setup(model, optimizer)
    loader = fabric.setup_dataloaders(DataLoader(dataset, batch_size=16, shuffle=True))
    throughput = Throughput(window_size=4, world_size=fabric.world_size)
    start, seen, batches = time.perf_counter(), 0, 0
    for epoch in range(4):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
            batches += 1
            seen += x.shape[0]
            throughput.update(time=time.perf_counter() - start, batches=batches, samples=seen)
        fabric.log_dict({"loss": loss.detach(), "epoch": epoch}, step=epoch)
        fabric.print(f"epoch {epoch} loss {loss.item():.4f}")
    model.eval()
    x, y = move_data_to_device(dataset.tensors, fabric.device)
    with torch.no_grad():
        correct = (model(x).argmax(dim=1) == y).float().mean()
    accuracy = fabric.all_reduce(correct, reduce_op="mean")
    fabric.save("classifier.ckpt", {"model": model, "optimizer": optimizer, "epoch": 4})
    rank_zero_info(f"accuracy {accuracy.item():.3f}")
    for logger in fabric.loggers:
        logger.finalize("success")
    fabric.barrier()
    fs = get_filesystem("classifier.ckpt")
    return {
        "accuracy": round(float(accuracy), 4),
        "world_size": fabric.world_size,
        "flops": flops,
        "rates": sorted(throughput.compute()),
        "checkpoint_exists": fs.exists("classifier.ckpt"),
        "csv": sorted(os.listdir(os.path.join("logs", "csv", "version_0"))),
    }


if __name__ == "__main__":
    assert not XLAAccelerator.is_available() and CPUAccelerator.auto_device_count() == 1
    fabric = L.Fabric(
        accelerator="cpu", devices=2, strategy="ddp_spawn", plugins=[LightningEnvironment()],
        loggers=[CSVLogger(root_dir="logs", name="csv"), TensorBoardLogger(root_dir="logs", name="tb")],
    )
    result = fabric.launch(train)
    result["cuda_devices"] = CUDAAccelerator.auto_device_count()
    print(json.dumps(result, sort_keys=True))
