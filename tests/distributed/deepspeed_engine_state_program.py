"""Code that drives DeepSpeed's engine itself, as Lightning Fabric's strategy API allows: one process on the CPU,
``setup_module_and_optimizers``, a step, ``save_checkpoint(path, state)``, another step, ``load_checkpoint`` back.

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
    print(json.dumps({
        "files": sorted(p.name for p in out.iterdir()), "moved": moved,
        "restored": all(torch.equal(a, b) for a, b in zip(saved, engine.parameters())),
        "step": state["step"], "info": state["info"], "user_keys_left": sorted({"step", "info"} & set(rest)),
        "engine_keys": "ds_config" in rest,
    }))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
