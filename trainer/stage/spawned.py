"""A stage run in spawned workers (``ddp_spawn``): the workers train, the launching process gets the results.

What comes back from rank 0, as Lightning's spawn does it: the trained weights (loaded into the user's
module), the loop counters, the logged metrics, the callbacks' states (so ``best_model_path`` is known
here) and the stage's return value (validation/test metrics, predictions).
"""

from __future__ import annotations

import os
import pickle
from typing import TYPE_CHECKING, Any

import torch
from plugins.apply_func import apply_to_collection

from plugins.checkpoint_io import loads_trusted, trusted_loads
from trainer.checkpointing.loop_state import adopt_loop_states, loops_state_dict
from trainer.checkpointing.strategy_state import module_state
from trainer.distributed.launch import start_processes

from trainer.stage.stage_run import StageRun

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from trainer.datamodule import DataModule
    from trainer.module import Module
    from trainer.trainer import Trainer

    # ``run_stage`` (stage/run.py), passed in: (trainer, stage, model, datamodule, given loaders, ckpt_path) -> output
    RunStage = Callable[[Trainer, str, Module, DataModule | None, Mapping[str, Any], str | os.PathLike[str] | None],
                        list[dict[str, float]] | list[Any] | None]

# what a user reads on the Trainer after a stage, besides the loops' progress object
_COUNTERS = ("should_stop", "num_training_batches", "num_val_batches", "num_test_batches", "num_predict_batches")


def run_stage_in_workers(
    run_stage: RunStage, trainer: Trainer, stage: str, model: Module, datamodule: DataModule | None,
    given: Mapping[str, object], ckpt_path: str | os.PathLike[str] | None,
) -> list[dict[str, float]] | list[Any] | None:
    """Run ``run_stage`` (the caller's, passed in: each worker runs the stage again) in the spawned workers, and
    bring rank 0's results back to this process's trainer and model."""
    trainer.stage_run = StageRun(trainer)  # an earlier call's plan (read-only mappings) stays here: workers plan anew
    for name in ("sources", "build"):  # the fit loop's view of that plan
        trainer.fit_loop.__dict__.pop(name, None)
    trainer.lightning_module = model  # here too, as Lightning sets it before its workers start (and a failure keeps it)
    # Fabric.launch's call; each worker joins the group in run_plan, after planning the call
    _, payload = start_processes(trainer.strategy, _worker_stage, (run_stage, stage, model, datamodule, given,
                                                                   ckpt_path, loads_trusted()), trainer, join=False)
    if payload is None:
        raise RuntimeError(f"Trainer.{stage} with {type(trainer.strategy).__name__}: rank 0 sent no result back.")
    results = pickle.loads(payload)  # bytes this run's own rank 0 just made (not a file from elsewhere)
    # rank 0's results on this process's trainer, model and callbacks, as if the stage had run here
    model.load_state_dict(results["state_dict"], strict=model.strict_loading)  # a partial state_dict may be on purpose
    trainer.lightning_module, model.trainer = model, trainer
    trainer.datamodule = datamodule
    vars(trainer.progress).update(vars(results["progress"]))  # in place: the loops hold this object
    adopt_loop_states(trainer, results["loops"])  # and the loops' own counts (Lightning's layout)
    for name, value in results["counters"].items():
        setattr(trainer, name, value)
    trainer.stage_run.results = results["results"]
    trainer.stage_run.logged_metrics = results["logged_metrics"]
    for callback in trainer.callbacks:
        state = results["callbacks"].get(callback.state_key)
        if state is None:
            continue
        if getattr(callback, "dirpath", "") is None:  # ModelCheckpoint: the directory the workers chose
            callback.dirpath = results["callback_dirs"].get(callback.state_key)
        callback.load_state_dict(state)
    trainer.strategy.on_stage_end()  # the call ended here too: the module is on the CPU (``model.device`` says so)
    return results["output"]


def _worker_stage(
    trainer: Trainer, run_stage: RunStage, stage: str, model: Module, datamodule: DataModule | None,
    given: Mapping[str, object], ckpt_path: str | os.PathLike[str] | None, trusted: bool = False,
) -> bytes | None:
    _own_memory(model)  # start_processes set the environment to torchrun's variables (the launcher set them)
    with trusted_loads(False if trusted else None):  # the call's weights_only=False holds in its workers too
        output = run_stage(trainer, stage, model, datamodule, given, ckpt_path)
    state_dict = module_state(trainer.strategy, model)
    if not trainer.is_global_zero:
        return None
    to_cpu = lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t  # noqa: E731
    results = {
        "state_dict": {k: to_cpu(v) for k, v in state_dict.items()},
        "progress": trainer.progress,
        "loops": loops_state_dict(trainer),
        "counters": {name: getattr(trainer, name) for name in _COUNTERS if hasattr(trainer, name)},
        "results": trainer.stage_run.results,
        "logged_metrics": trainer.stage_run.logged_metrics,
        "callbacks": {cb.state_key: cb.state_dict() for cb in trainer.callbacks},
        "callback_dirs": {cb.state_key: getattr(cb, "dirpath", None) for cb in trainer.callbacks},
        "output": apply_to_collection(output, torch.Tensor, to_cpu),
    }
    return pickle.dumps(apply_to_collection(results, torch.Tensor, to_cpu))


def _own_memory(model: torch.nn.Module) -> None:
    """Give this worker its own copy of the weights.

    ``torch.multiprocessing`` hands tensors to spawned workers in shared memory: without a copy every rank
    would update the same weights, and each step would be applied once per rank.
    """
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.data = tensor.data.clone()
