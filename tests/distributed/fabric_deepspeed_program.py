"""One Fabric loop under DeepSpeed ZeRO on 2 gloo processes, run on either framework (tests/distributed/
test_fabric_deepspeed.py).

``python fabric_deepspeed_program.py <lightning|relay> <stage>``: a regression MLP, AdamW, a global batch of 16
(8 per process), 2 epochs of 6 steps through ``fabric.setup(model, optimizer)``, ``fabric.backward`` and
``optimizer.step()``. After the first epoch a checkpoint is saved; after the second the weights are recorded, the
checkpoint is loaded back and the second epoch runs again, which must end on the same weights (module and
optimizer state restored). Rank 0 prints the weights, the losses, what ``load`` restored and the misuse messages.

Lightning Fabric's DeepSpeed strategy refuses a CPU accelerator (its ``setup_environment`` checks for CUDA) and
hands DeepSpeed the device index as the process's rank on the node (None for ``cpu``): the subclass below skips
that one check and numbers the CPU devices by local rank, and imports DeepSpeed and starts its backend as Relay's
strategy does (without MLflow and torch's inductor at start-up, without compiling its inference-only op);
everything else is Lightning's own code.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from tests.compat.fabric_program import error_of
from tests.compat.lightning_diff.harness import emit


def lightning_fabric(stage: int) -> tuple[type, object]:
    from plugins.strategies.deepspeed import import_deepspeed

    import_deepspeed()  # as Relay imports it: MLflow and torch's inductor (unused here) not at start-up
    from lightning.fabric import Fabric
    from lightning.fabric.strategies import DeepSpeedStrategy as LightningDeepSpeed
    from lightning.fabric.strategies.ddp import DDPStrategy

    class DeepSpeedStrategy(LightningDeepSpeed):  # Lightning's name: its messages name the class
        def setup_environment(self) -> None:
            self.parallel_devices = [torch.device("cpu", i) for i in range(len(self.parallel_devices))]
            DDPStrategy.setup_environment(self)  # LightningDeepSpeed's own refuses every accelerator but CUDA

        def _init_deepspeed_distributed(self) -> None:
            """As Relay's strategy starts DeepSpeed's backend on the CPU: without compiling its inference-only
            shared-memory op (1-3 min of C++ on 2 cores, no effect on training)."""
            import deepspeed

            from plugins.strategies.deepspeed_import import extensions_cache, without_shared_memory_inference_op

            # Relay's folder for DeepSpeed's C++ ops, set in each rank as Relay's strategy does (set before the
            # launch, it would make Lightning's rank 1 a program of other variables than rank 0's)
            os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(extensions_cache()))
            with without_shared_memory_inference_op(deepspeed):
                super()._init_deepspeed_distributed()

    return Fabric, DeepSpeedStrategy(stage=stage)


def relay_fabric(stage: int) -> tuple[type, object]:
    from plugins.strategies.deepspeed import DeepSpeedStrategy
    from trainer.fabric import Fabric

    return Fabric, "deepspeed" if stage == 2 else DeepSpeedStrategy(stage=stage)  # the name means stage 2


def warning_of(fn) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return "; ".join(f"{w.category.__name__}: {w.message}" for w in caught if "deprecated" not in str(w.message))


def full_weights(model: torch.nn.Module) -> list[list[float]]:
    """Every parameter in full on every rank (ZeRO-3 partitions them; gathering is a no-op at stages 1 and 2)."""
    import deepspeed

    params = list(model.parameters())
    with deepspeed.zero.GatheredParameters(params):
        return [p.detach().flatten().tolist() for p in params]


def train_epoch(fabric, model, optimizer, loader) -> list[float]:
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(fabric.all_reduce(loss.detach(), reduce_op="mean").item(), 6))
    return losses


def misuse(fabric, model, optimizer) -> dict[str, str]:
    return {
        "clip_norm": error_of(lambda: fabric.clip_gradients(model, optimizer, max_norm=1.0)),
        "clip_value": error_of(lambda: fabric.clip_gradients(model, optimizer, clip_val=1.0)),
        "setup_optimizers": error_of(lambda: fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))),
        "save_filter": error_of(lambda: fabric.save("f", {"model": model}, filter={"model": lambda k, v: True})),
        "no_backward_sync": warning_of(lambda: fabric.no_backward_sync(model).__enter__()),
    }


def main() -> None:
    stage = int(sys.argv[2])
    Fabric, strategy = {"lightning": lightning_fabric, "relay": relay_fabric}[sys.argv[1]](stage)
    fabric = Fabric(accelerator="cpu", devices=2, strategy=strategy)
    fabric.launch()
    fabric.seed_everything(42)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    model, optimizer = fabric.setup(model, torch.optim.AdamW(model.parameters(), lr=0.01))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(96, 6, generator=generator)
    y = x.sum(dim=1, keepdim=True).sin() + 0.1 * torch.randn(96, 1, generator=generator)
    loader = fabric.setup_dataloaders(DataLoader(TensorDataset(x, y), batch_size=8))

    losses = train_epoch(fabric, model, optimizer, loader)
    fabric.save("mid.ckpt", {"model": model, "optimizer": optimizer, "step": len(losses)})
    losses += train_epoch(fabric, model, optimizer, loader)
    final = full_weights(model)
    restored = {"model": model, "optimizer": optimizer, "step": 0}
    fabric.load("mid.ckpt", restored)
    resumed_losses = train_epoch(fabric, model, optimizer, loader)
    resumed = full_weights(model)
    errors = misuse(fabric, model, optimizer)
    if fabric.is_global_zero:
        emit({"weights": final, "resumed": resumed, "losses": losses, "resumed_losses": resumed_losses,
              "restored_step": restored["step"], "world_size": fabric.world_size, "errors": errors})


if __name__ == "__main__":
    main()
