"""Code that drives DeepSpeed's engine itself, as Lightning Fabric's strategy API allows: one process on the CPU,
``setup_module_and_optimizers``, a step, ``save_checkpoint(path, state)``, another step, ``load_checkpoint`` back.
Then, in the same process group, a Trainer whose DeepSpeed config names the optimizer (``configure_optimizers``
returns None): DeepSpeed builds it, as under Lightning's Trainer.

``python deepspeed_engine_state_program.py OUT``: prints one JSON line of what the user reads back.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(out: Path) -> None:
    from plugins.strategies.deepspeed import DeepSpeedStrategy
    from trainer.fabric import Fabric

    fabric = Fabric(accelerator="cpu", strategy=DeepSpeedStrategy(stage=2), devices=1)
    fabric.launch()
    strategy = fabric.strategy
    with strategy.module_init_context():
        torch.manual_seed(0)
        module = torch.nn.Linear(4, 2)
    engine, [optimizer], _ = strategy.setup_module_and_optimizers(module, [torch.optim.SGD(module.parameters(), 0.1)])

    def step() -> None:
        engine.backward(engine(torch.ones(3, 4)).sum())
        engine.step()

    step()
    strategy.save_checkpoint(out, {"model": engine, "optimizer": optimizer, "step": 3, "info": {"a": 1}})
    saved = [p.detach().clone() for p in engine.parameters()]
    step()
    moved = not all(torch.equal(a, b) for a, b in zip(saved, engine.parameters()))
    state = {"model": engine, "optimizer": optimizer, "step": 0, "info": {}}
    rest = strategy.load_checkpoint(out, state)
    trained = fit_with_the_configs_optimizer()
    print(json.dumps({"config_optimizer_trained": trained,
        "files": sorted(p.name for p in out.iterdir()), "moved": moved,
        "restored": all(torch.equal(a, b) for a, b in zip(saved, engine.parameters())),
        "step": state["step"], "info": state["info"], "user_keys_left": sorted({"step", "info"} & set(rest)),
        "engine_keys": "ds_config" in rest,
    }))


def fit_with_the_configs_optimizer() -> bool:
    from plugins.strategies.deepspeed import DeepSpeedStrategy
    from trainer import Trainer
    from trainer.demos import BoringModel

    class NoOptimizer(BoringModel):
        def configure_optimizers(self) -> None:
            return None

    model = NoOptimizer()
    before = [p.detach().clone() for p in model.parameters()]
    config = {"optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 2}}
    Trainer(accelerator="cpu", strategy=DeepSpeedStrategy(config=config), max_steps=2, logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            limit_val_batches=0).fit(model)
    return all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
