"""A Trainer call: plan it, start the processes if needed, run the plan, end the stage.

``run_plan`` reads as the call runs, each phase in its own module: the plan (``plan.py``, built before anything
starts), the stage's beginning (``begin.py``: environment, restore point, callbacks, ``prepare_data``/``setup``), the
model's set-up (``model_setup.py``), the stage around its loop (``fit.py`` or ``evaluate.py``), the stage's end
(``end.py``, whatever happened).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainer.checkpointing.loop_state import adopt_loop_states
from trainer.distributed.heartbeat import watch_ranks
from trainer.distributed.launch import start_processes
from trainer.model.compiled import unwrap_compiled
from trainer.stage.begin import begin_stage
from trainer.stage.end import end_stage, stage_failed
from trainer.stage.evaluate import evaluate_stage
from trainer.stage.fit import fit_stage
from trainer.stage.model_setup import set_up_model
from trainer.stage.plan import StagePlan, plan_stage
from trainer.stage.spawned import run_stage_in_workers
from trainer.stage.stage_run import StageRun
from trainer.utilities.exceptions import _TunerExitException as TunerExit
from trainer.utilities.rank_zero import rank_zero_info

if TYPE_CHECKING:
    from trainer.datamodule import DataModule
    from trainer.module import Module
    from trainer.trainer import Trainer


def run_stage(
    trainer: Trainer, stage: str, model: Module, datamodule: DataModule | None, given: Mapping[str, object],
    ckpt_path: str | os.PathLike[str] | None,
) -> list[dict[str, float]] | list[Any] | None:
    model = unwrap_compiled(model)  # a torch.compile result: its Module, steps compiled (Lightning's from_compiled)
    plan = plan_stage(trainer, stage, model, datamodule, given, ckpt_path)
    if plan.spawns:  # ddp_spawn: workers run it (started by start_processes, as Fabric.launch), results come back
        return run_stage_in_workers(run_stage, trainer, stage, model, datamodule, given, ckpt_path)
    if plan.launcher is not None:  # plain `python script.py` with several processes: start them, then exit
        start_processes(plan.strategy, None, (), trainer)  # the call Fabric.launch makes; it does not return
    return run_plan(trainer, plan)


def run_plan(trainer: Trainer, plan: StagePlan) -> list[dict[str, float]] | list[Any] | None:
    """Run a planned call, phase by phase, with a new ``StageRun`` on the Trainer (the outer call's is put back after
    a nested one, the tuner's)."""
    outer = trainer.stage_run if trainer.stage_run.active else None
    outer_state = vars(trainer.state).copy()  # a nested call (from a hook) puts the outer call's state back
    run = trainer.stage_run = StageRun(trainer, plan, active=True, nested=outer is not None and not outer.released)
    try:
        try:
            output, loop_ended = None, True
            try:
                begin_stage(trainer, plan, run)
                set_up_model(trainer, plan.model, plan.stage == "fit", run.resume)
                with watch_ranks(trainer.strategy, trainer.progress):  # start-up over: training timeouts, a heartbeat
                    output = fit_stage(trainer, plan, run) if plan.stage == "fit" else evaluate_stage(
                        trainer, plan, run.build_loaders)
            except TunerExit:  # the tuner's callbacks end the call once they have their answer: a success (Lightning)
                loop_ended = False
            end_stage(trainer, plan, run, loop_ended)
            return output
        except BaseException as exc:
            stage_failed(trainer, plan, run, exc)
            raise
    except KeyboardInterrupt:
        if outer is not None:  # the outer call shuts down
            raise
        # Lightning's ending: the state is INTERRUPTED, on_exception ran, the strategy's end done; the process exits 1
        rank_zero_info("\nDetected KeyboardInterrupt, attempting graceful shutdown ...")
        raise SystemExit(1) from None
    finally:
        run.active = False
        if outer is not None:
            trainer.stage_run = outer
            vars(trainer.state).update(outer_state)


def rerun_loop(trainer: Trainer) -> list[dict[str, float]] | list[Any] | None:
    """Run the current call's loop once more, planned again from the Trainer's present settings (limits, steps)
    on the inputs this call was given: the tuner's trials and learning-rate search, from inside a hook. No sanity
    check; the fit loop's own attributes are put back afterwards, so a run that called this carries on unchanged."""
    run = trainer.stage_run
    first = run.plan
    plan = plan_stage(trainer, first.stage, first.model, first.datamodule, first.given, None)
    if plan.stage != "fit":
        return evaluate_stage(trainer, plan, run.build_loaders)
    loop = trainer.fit_loop
    saved, counts = dict(vars(loop)), loop.state_dict()  # the counter objects are changed in place: their states too
    try:
        loop.run(run, run.build_loaders, replan=plan)
    finally:
        vars(loop).clear()
        vars(loop).update(saved)
        loop._built_train = None  # a training loader asked for early is stale once a trial ran: the fit asks again
        restarting = loop._restarting
        adopt_loop_states(trainer, {"fit_loop": counts})
        loop._restarting = restarting
    return None


def reload_shown_loaders(trainer: Trainer) -> None:
    """The current call's loaders built again from the present settings, as ``trainer.train_dataloader`` and
    ``val_dataloaders`` show them: after a batch size search Lightning rebuilds them at the size it settled on."""
    run = trainer.stage_run
    first = run.plan
    plan = plan_stage(trainer, first.stage, first.model, first.datamodule, first.given, None)
    for key, source in plan.sources.items():
        if key in run.loaders or key in ("train", "val"):
            run.build_loaders(source)
