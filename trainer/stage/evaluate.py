"""A ``validate``, ``test`` or ``predict`` stage around its loop (``loops/evaluation.py``): its loaders built when
the loop asks (again if a hook asks, the batch size finder), their batch counts shown on the Trainer as Lightning
shows them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainer.arguments.limits import apply_limit
from trainer.data.loaders import num_batches
from trainer.loops.evaluation import run_evaluation, run_predict

if TYPE_CHECKING:
    from trainer.data.loaders import LoaderPlan
    from trainer.stage.plan import Loaders, LoaderSource, StagePlan
    from trainer.trainer import Trainer


def evaluate_stage(
    trainer: Trainer, plan: StagePlan, build: Callable[[LoaderSource], Loaders]
) -> list[dict[str, float]] | list[Any]:
    """A ``validate``, ``test`` or ``predict`` call's loop: its loaders built (and shown on the Trainer), then run."""

    def load() -> tuple[list[LoaderPlan], list[int | float]]:
        loaders = build(plan.sources[plan.eval_key])
        counts = shown_counts(loaders)
        if plan.stage == "validate":
            trainer.num_val_batches = counts
        elif plan.stage == "test":
            trainer.num_test_batches = counts
        else:
            trainer.num_predict_batches = counts
        return loaders.plans, loaders.counts

    plan.model.zero_grad()  # as Lightning before the loop asks for its loaders
    plans, counts = load()
    if plan.stage == "predict":
        return run_predict(trainer, plans, counts, reload=load)
    return run_evaluation(trainer, plan.stage, plans, counts, reload=load)


def shown_counts(loaders: Loaders) -> list[int | float]:
    """The batch counts Lightning shows: a CombinedLoader's per loader it combines, each with the limit applied (the
    loop runs the combined, which its mode and those counts bound)."""
    shown: list[int | float] = []
    for loader_plan, count in zip(loaders.plans, loaders.counts):
        parts = getattr(loader_plan, "parts", None)
        if not parts:
            shown.append(count)
        elif count == 0:
            shown += [0] * len(parts)
        else:
            shown += [apply_limit(loaders.limit, num_batches(p.loader)) for p in parts]
    return shown
