"""Validation, test and predict loops: no gradients, metrics aggregated per epoch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from trainer.data.batches import BatchMover
from trainer.loops.step_arguments import check_dataloader_idx, step_caller
from trainer.loops.dataloader_iter import steps, uses_dataloader_iter
from trainer.loops.evaluation_progress import progress_of
from trainer.loops.trackers import _Loop, _Progress
from trainer.metrics.results import to_float
from trainer.states import RunningStage, TrainerFn

if TYPE_CHECKING:
    from trainer.data.loaders import LoaderPlan
    from trainer.trainer import Trainer

_STAGES = {"validate": RunningStage.VALIDATING, "test": RunningStage.TESTING}


def capture_modes(module: torch.nn.Module) -> dict[str, bool]:
    """Each submodule's train/eval mode, so evaluation gives back exactly what it found (frozen parts too)."""
    return {name: m.training for name, m in module.named_modules()}


def restore_modes(module: torch.nn.Module, modes: dict[str, bool]) -> None:
    for name, m in module.named_modules():
        if name in modes:
            m.training = modes[name]


def no_grad_context(trainer: Trainer, fitting: bool) -> Any:
    """What an evaluation runs under (Lightning's rule): ``torch.inference_mode`` (or the strategy's choice, when it
    needs ``no_grad``) with ``Trainer(inference_mode=True)``; ``torch.no_grad`` with ``inference_mode=False`` and for
    the validation inside ``fit``, whose tensors training may use afterwards."""
    if fitting or not getattr(trainer, "inference_mode", True):
        return torch.no_grad()
    return trainer.strategy.evaluation_context()


def run_evaluation(
    trainer: Trainer, stage: str, plans: list[LoaderPlan], limits: list[int | float], sanity: bool = False,
    reload: Callable[[], tuple[list[LoaderPlan], list[int | float]]] | None = None, resume: bool = False,
) -> list[dict[str, float]]:
    """Run ``validation_step``/``test_step`` over every loader; returns each loader's epoch metrics.

    ``reload``: builds the loaders again when a hook asked for it in ``on_<stage>_start`` (BatchSizeFinder).
    ``resume``: finish a run a restored checkpoint interrupted: the batches its counts show completed are passed
    over (in loader order)."""
    module, hooks = trainer.lightning_module, trainer.stage_run.hooks
    prefix = "validation" if stage == "validate" else "test"
    step_fn = trainer.strategy.step_function(module, f"{prefix}_step")
    results = trainer.stage_run.results[stage]
    results.reset_epoch()
    prev_results, prev_on_step = trainer.stage_run.active_results, trainer.stage_run.on_step
    prev_stage = trainer.progress.set_stage(RunningStage.SANITY_CHECKING if sanity else _STAGES[stage])
    trainer.stage_run.active_results, trainer.stage_run.on_step = results, False
    counts = progress_of(trainer, stage, sanity)  # trainer.validate_loop / test_loop.batch_progress
    skip = 0
    if counts is not None and resume:
        counts.reset_on_restart()
        skip = counts.current.completed
    elif counts is not None:
        counts.reset_on_run()
    modes = capture_modes(module)
    fitting = trainer.state.fn == TrainerFn.FITTING
    outer = no_grad_context(trainer, fitting)  # around the hooks too (on_validation_start sees it), as Lightning
    outer.__enter__()
    getattr(module, f"on_{prefix}_model_eval")()
    try:
        hooks.call(f"on_{prefix}_start")
        plans, limits = reloaded(trainer, reload, plans, limits)
        multiple = len(plans) > 1
        loader = "val" if prefix == "validation" else prefix
        check_dataloader_idx(module, loader, (f"{prefix}_step", f"on_{prefix}_batch_start", f"on_{prefix}_batch_end"),
                             multiple)
        step_fn = step_caller(step_fn, getattr(module, f"{prefix}_step"))
        hooks.call(f"on_{prefix}_epoch_start")
        with no_grad_context(trainer, fitting):
            for dl_idx, (plan, limit) in enumerate(zip(plans, limits)):
                final = dl_idx == len(plans) - 1  # is_last_batch: the last batch of the last loader
                passed = int(min(skip, limit))
                skip -= passed
                _run_loader(trainer, plan, limit, step_fn, prefix, dl_idx, multiple, counts, final, passed)
            if counts is not None:
                counts.is_last_batch = True
        hooks.call(f"on_{prefix}_epoch_end")
        results.finish_epoch(trainer.strategy.all_reduce)
        results.hide_steps()
        epoch_metrics = {k: to_float(v) for k, v in results.epoch_for_logger().items()}
        if not sanity:  # during fit: the index of the last step taken, as in Lightning
            step = max(trainer.global_step - 1, 0) if trainer.state.fn == TrainerFn.FITTING else trainer.global_step
            trainer.stage_run.send_to_loggers(results.epoch_for_logger(), step)
        hooks.call(f"on_{prefix}_end")
    finally:
        if hooks.has(f"on_{prefix}_model_train"):
            hooks.call(f"on_{prefix}_model_train")
        else:
            restore_modes(module, modes)
        trainer.progress.set_stage(prev_stage)
        trainer.stage_run.active_results, trainer.stage_run.on_step = prev_results, prev_on_step
        outer.__exit__(None, None, None)
    if sanity:
        results.reset()
    if len(plans) <= 1:
        return [epoch_metrics]
    return [{k: v for k, v in epoch_metrics.items() if _belongs(results, k, i)} for i in range(len(plans))]


def _belongs(results: Any, key: str, loader: int) -> bool:
    """A key in loader ``loader``'s results: its suffix says so, or it was logged (without one) from that loader's
    batches, or outside any loader (at epoch end: every loader's)."""
    if "/dataloader_idx_" in key:
        return key.endswith(f"/dataloader_idx_{loader}")
    name = key[:-len("_epoch")] if key.endswith("_epoch") and key not in results.loader_of else key
    return results.loader_of.get(name) in (None, loader)


def _run_loader(trainer: Trainer, plan: LoaderPlan, limit: int | float, step_fn: Any, prefix: str, dl_idx: int,
                multiple: bool, counts: Any = None, final: bool = False, passed: int = 0) -> None:
    hooks, move, results = trainer.stage_run.hooks, BatchMover(trainer), trainer.stage_run.active_results
    trainer.stage_run.log_suffix = f"/dataloader_idx_{dl_idx}" if multiple else ""
    extra = (dl_idx,) if multiple else ()  # dataloader_idx only with several loaders (Lightning's calls)
    results.current_loader = dl_idx
    if uses_dataloader_iter(getattr(trainer.lightning_module, f"{prefix}_step", None)):
        try:
            _run_iterator_steps(trainer, plan, limit, step_fn, prefix, dl_idx, extra, counts, final)
        finally:
            trainer.stage_run.log_suffix = ""
            results.current_loader = None
        return
    try:
        for batch_idx, batch in enumerate(plan.iterate(trainer.current_epoch)):
            if batch_idx >= limit:
                break
            if batch_idx < passed:  # run before the checkpoint this run resumes from
                continue
            batch = move(batch, dl_idx)
            trainer.stage_run.batch_for_size = batch
            if counts is not None:
                counts.is_last_batch = final and batch_idx + 1 == limit
                counts.increment_ready()
            hooks.call(f"on_{prefix}_batch_start", batch, batch_idx, *extra)
            if counts is not None:
                counts.increment_started()
            out = step_fn(batch, batch_idx, extra)
            if counts is not None:
                counts.increment_processed()
            hooks.call(f"on_{prefix}_batch_end", out, batch, batch_idx, *extra)
            if counts is not None:
                counts.increment_completed()
            if not trainer.sanity_checking:  # each evaluation batch's values, numbered per Trainer call
                progress = trainer.progress
                trainer.stage_run.send_to_loggers(results.step_for_logger(), progress.eval_batches, add_epoch=False)
                progress.eval_batches += 1
    finally:
        trainer.stage_run.log_suffix = ""
        results.current_loader = None


def _run_iterator_steps(trainer: Trainer, plan: LoaderPlan, limit: int | float, step_fn: Any, prefix: str,
                        dl_idx: int, extra: tuple, counts: Any, final: bool) -> list[Any]:
    """The ``dataloader_iter`` flavour (``dataloader_iter.py``): the step takes its own batches; no batch-start hook
    (there is no batch yet), the batch-end hook sees the last batch taken. Returns the steps' outputs."""
    hooks, outputs = trainer.stage_run.hooks, []
    for it in steps(plan.iterate(trainer.current_epoch if prefix != "predict" else 0), limit, dl_idx):
        if counts is not None:
            counts.increment_ready()
            counts.increment_started()
        try:
            out = step_fn(it, it.batch_idx + 1, extra)
        except StopIteration:
            break
        if counts is not None:
            counts.increment_processed()
            if hasattr(counts, "is_last_batch"):
                counts.is_last_batch = final and it.done
        hooks.call(f"on_{prefix}_batch_end", out, it.batch, it.batch_idx, *extra)
        if counts is not None:
            counts.increment_completed()
        outputs.append(out)
    return outputs


class PredictLoop(_Loop):
    """``trainer.predict_loop``: the last ``predict`` call's outputs, which Lightning code reads as ``predictions``,
    and its batch counts (Lightning's ``_Progress``: ``total`` over calls, ``current`` for the last)."""

    def __init__(self, trainer: Any = None) -> None:
        super().__init__(trainer)
        self.predictions: list[Any] = []
        self.max_batches: list[int | float] = []
        self.return_predictions = True
        self.batch_progress = _Progress()


def reloaded(trainer: Trainer, reload: Any, plans: list[Any], limits: list[int | float]) -> tuple[list[Any], list]:
    """The loaders built again if a hook asked (``trainer.stage_run.reload_eval_loaders``), else as they were."""
    run = trainer.stage_run
    if reload is not None and run.reload_eval_loaders:
        run.reload_eval_loaders = False
        return reload()
    return plans, limits


def run_predict(trainer: Trainer, plans: list[LoaderPlan], limits: list[int | float],
                reload: Callable[[], tuple[list[LoaderPlan], list[int | float]]] | None = None) -> list[Any]:
    module, hooks, strategy = trainer.lightning_module, trainer.stage_run.hooks, trainer.strategy
    step_fn = strategy.step_function(module, "predict_step")
    prev_stage = trainer.progress.set_stage(RunningStage.PREDICTING)
    modes = capture_modes(module)
    outer = no_grad_context(trainer, False)
    outer.__enter__()
    module.on_predict_model_eval()
    move = BatchMover(trainer)
    outputs: list[list[Any]] = []
    multiple = len(plans) > 1
    keep = trainer.predict_loop.return_predictions
    counts = trainer.predict_loop.batch_progress
    counts.reset_on_run()
    try:
        hooks.call("on_predict_start")
        plans, limits = reloaded(trainer, reload, plans, limits)
        multiple = len(plans) > 1
        check_dataloader_idx(module, "predict", ("predict_step", "on_predict_batch_start", "on_predict_batch_end"),
                             multiple)
        step_fn = step_caller(step_fn, module.predict_step)
        hooks.call("on_predict_epoch_start")
        with no_grad_context(trainer, False):
            for dl_idx, (plan, limit) in enumerate(zip(plans, limits)):
                loader_out: list[Any] = []
                extra = (dl_idx,) if multiple else ()
                if uses_dataloader_iter(module.predict_step):
                    out_steps = _run_iterator_steps(trainer, plan, limit, step_fn, "predict", dl_idx, extra, counts,
                                                    False)
                    outputs.append(out_steps if keep else [])
                    continue
                for batch_idx, batch in enumerate(plan.iterate(0)):
                    if batch_idx >= limit:
                        break
                    batch = move(batch, dl_idx)
                    counts.increment_ready()
                    hooks.call("on_predict_batch_start", batch, batch_idx, *extra)
                    counts.increment_started()
                    out = step_fn(batch, batch_idx, extra)
                    counts.increment_processed()
                    hooks.call("on_predict_batch_end", out, batch, batch_idx, *extra)
                    counts.increment_completed()
                    if keep:  # return_predictions=False keeps nothing: large predictions are not held in memory
                        loader_out.append(out)
                outputs.append(loader_out)
        hooks.call("on_predict_epoch_end")
        hooks.call("on_predict_end")
    finally:
        restore_modes(module, modes)
        trainer.progress.set_stage(prev_stage)
        outer.__exit__(None, None, None)
    trainer.predict_loop.predictions = (outputs if multiple else outputs[0]) if keep else []
    return trainer.predict_loop.predictions


def print_results(stage: str, results: list[dict[str, float]]) -> None:
    """A small table of the final metrics, like Lightning prints after validate/test."""
    for i, metrics in enumerate(results):
        title = f"{stage} metrics" + (f" (dataloader {i})" if len(results) > 1 else "")
        width = max([len(k) for k in metrics] + [len(title)])
        print(f"{title:<{width}}  value")
        for key, value in sorted(metrics.items()):
            print(f"{key:<{width}}  {value:.6g}")
