"""The loops' own state in a checkpoint: Lightning's ``loops`` layout, written and read back in one place.

A checkpoint's ``loops`` entry holds Relay's counters (``LoopProgress.state_dict``: the epoch, the global step and
the data position a resume continues from) and, beside them, the loop states in Lightning's layout:
``fit_loop`` / ``validate_loop`` / ``test_loop`` / ``predict_loop``, each the loop's ``state_dict()``
(``"epoch_progress"``, ``"epoch_loop.batch_progress"``, ``"epoch_loop.automatic_optimization.optim_progress"``, ...).
``contents.py`` writes them (``loops_state_dict``); ``resume.py`` reads them back (``restore_loop_state``). A
checkpoint written before Relay kept these (Relay's counters only) gets a fit-loop state made from its counters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.states import TrainerFn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from trainer.trainer import Trainer

LOOP_KEYS = ("fit_loop", "validate_loop", "test_loop", "predict_loop")
_STAGE_LOOPS = {TrainerFn.FITTING: "fit_loop", TrainerFn.VALIDATING: "validate_loop", TrainerFn.TESTING: "test_loop",
                TrainerFn.PREDICTING: "predict_loop"}


def loops_state_dict(trainer: Trainer) -> dict[str, object]:
    """The four loops' states, under Lightning's keys."""
    return {key: getattr(trainer, key).state_dict() for key in LOOP_KEYS}


def restore_loop_state(trainer: Trainer, loops: dict[str, Any], fn: TrainerFn | str | None) -> None:
    """Load the state of the loop the call ``fn`` runs (Lightning restores that one only); the loop is then
    ``restarting`` where the checkpoint was taken mid-way and applies Lightning's restart rules when it runs."""
    key = _STAGE_LOOPS.get(TrainerFn(fn)) if fn is not None else None
    if key is None:
        return
    state = loops.get(key)
    if state is None and key == "fit_loop":
        state = fit_loop_state_from_counters(loops)
    if state is not None:
        getattr(trainer, key).load_state_dict(state)


def adopt_loop_states(trainer: Trainer, states: Mapping[str, object]) -> None:
    """Take over the loop states another process reached (the spawned workers' rank 0), as if the loops had run
    here: counts only, nothing restarting."""
    for key, state in states.items():
        loop = getattr(trainer, key)
        loop.load_state_dict(state)
        loop.restarting = False
        loop.on_iteration_done()
        for child in vars(loop).values():
            if hasattr(child, "on_iteration_done") and hasattr(child, "restarting"):
                child.restarting = False
                child.on_iteration_done()


def _tracker(count: int, *fields: str, **others: int) -> dict[str, int]:
    return {name: others.get(name, count) for name in fields}


def _progress(total: dict[str, int], current: dict[str, int], **extra: object) -> dict[str, object]:
    return {"total": total, "current": current, **extra}


def fit_loop_state_from_counters(loops: dict[str, Any]) -> dict[str, Any]:
    """A Lightning fit-loop state from Relay's counters alone (a checkpoint that has no ``fit_loop`` entry): the
    epochs done, the one under way (mid-epoch: its batches trained on), the optimizer steps taken."""
    epoch, steps = int(loops.get("epoch", 0)), int(loops.get("global_step", 0))
    seen, batches = int(loops.get("batches_seen", 0)), int(loops.get("total_batches", 0))
    finished = bool(loops.get("epoch_finished", False))
    full = ("ready", "started", "processed", "completed")
    if finished:  # taken at the epoch's end: processed, not completed
        epochs = _tracker(epoch + 1, *full, completed=epoch)
    elif seen:  # mid-epoch: started, not processed
        epochs = _tracker(epoch + 1, *full, processed=epoch, completed=epoch)
    else:
        epochs = _tracker(epoch, *full)
    return {
        "state_dict": {},
        "epoch_progress": _progress(epochs, dict(epochs)),
        "epoch_loop.state_dict": {"_batches_that_stepped": steps},
        "epoch_loop.batch_progress": _progress(_tracker(batches, *full), _tracker(seen, *full),
                                               is_last_batch=finished),
        "epoch_loop.scheduler_progress": _progress(_tracker(0, "ready", "completed"),
                                                   _tracker(0, "ready", "completed")),
        "epoch_loop.manual_optimization.state_dict": {},
        "epoch_loop.manual_optimization.optim_step_progress": _progress(_tracker(0, "ready", "completed"),
                                                                        _tracker(0, "ready", "completed")),
        "epoch_loop.automatic_optimization.state_dict": {},
        "epoch_loop.automatic_optimization.optim_progress": {"optimizer": {
            "step": _progress(_tracker(steps, "ready", "completed"), _tracker(0, "ready", "completed")),
            "zero_grad": _progress(_tracker(steps, "ready", "started", "completed"),
                                   _tracker(0, "ready", "started", "completed")),
        }},
        "epoch_loop.val_loop.state_dict": {},
        "epoch_loop.val_loop.batch_progress": _progress(_tracker(0, *full), _tracker(0, *full), is_last_batch=False),
    }
