"""Validation, test and predict loops: no gradients, metrics aggregated per epoch."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

import torch

from trainer.data.batches import BatchMover
from trainer.loops.step_arguments import evaluation_step_caller, steps
from trainer.metrics.results import to_float
from trainer.states import RunningStage, TrainerFn

if TYPE_CHECKING:
    from trainer.data.loaders import LoaderPlan
    from trainer.loops.step_arguments import StepCall
    from trainer.loops.trackers import _BatchProgress as BatchProgress
    from trainer.loops.trackers import _Progress
    from trainer.metrics.results import Results
    from trainer.trainer import Trainer

_STAGES = {"validate": RunningStage.VALIDATING, "test": RunningStage.TESTING}


def progress_of(trainer: Trainer, stage: str) -> BatchProgress | None:
    """The ``batch_progress`` an evaluation run counts into: ``validate_loop``'s / ``test_loop``'s, the fit loop's
    ``epoch_loop.val_loop``'s inside ``fit``, the sanity check's too (the fit loop resets it after, as Lightning)."""
    if trainer.state.fn == TrainerFn.FITTING:  # validation inside fit: the fit loop's val_loop counts it
        epoch_loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
        return None if epoch_loop is None or stage != "validate" else epoch_loop.val_loop.batch_progress
    loop = getattr(trainer, "validate_loop" if stage == "validate" else "test_loop", None)
    return None if loop is None else loop.batch_progress




def capture_modes(module: torch.nn.Module) -> dict[str, bool]:
    """Each submodule's train/eval mode, so evaluation gives back exactly what it found (frozen parts too)."""
    return {name: m.training for name, m in module.named_modules()}


def restore_modes(module: torch.nn.Module, modes: dict[str, bool]) -> None:
    for name, m in module.named_modules():
        if name in modes:
            m.training = modes[name]


def no_grad_context(trainer: Trainer, fitting: bool) -> contextlib.AbstractContextManager[None]:
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
    counts = progress_of(trainer, stage)  # trainer.validate_loop / test_loop.batch_progress
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
    try:  # whatever raises from here on (a hook included), the grad mode and the modules' modes are given back
        with trainer.stage_run.logging_off(f"on_{prefix}_model_eval"):
            getattr(module, f"on_{prefix}_model_eval")()
        hooks.call(f"on_{prefix}_start")
        plans, limits = reloaded(trainer, reload, plans, limits)
        multiple = len(plans) > 1
        loader = "val" if prefix == "validation" else prefix
        step_fn, by_iterator = evaluation_step_caller(module, prefix, loader, step_fn, multiple)
        step_fn = profiled_step(trainer, f"{prefix}_step", step_fn, limits)
        hooks.call(f"on_{prefix}_epoch_start")
        with no_grad_context(trainer, fitting):
            if by_iterator:
                _run_iterator_steps(trainer, plans, limits, step_fn, prefix, multiple, counts, "[_EvaluationLoop]")
            for dl_idx, (plan, limit) in enumerate(zip(plans, limits) if not by_iterator else ()):
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
        try:
            if hooks.has(f"on_{prefix}_model_train"):
                hooks.call(f"on_{prefix}_model_train")  # refuses self.log (NOT_LOGGING)
            else:
                restore_modes(module, modes)
        finally:  # a hook that raised here too still leaves the grad mode and the stage as they were
            trainer.progress.set_stage(prev_stage)
            trainer.stage_run.active_results, trainer.stage_run.on_step = prev_results, prev_on_step
            outer.__exit__(None, None, None)
    if sanity:
        results.reset()
    if len(plans) <= 1:
        return [epoch_metrics]
    return [{k: v for k, v in epoch_metrics.items() if _belongs(results, k, i)} for i in range(len(plans))]


def _belongs(results: Results, key: str, loader: int) -> bool:
    """A key in loader ``loader``'s results: its suffix says so, or it was logged (without one) from that loader's
    batches, or outside any loader (at epoch end: every loader's)."""
    if "/dataloader_idx_" in key:
        return key.endswith(f"/dataloader_idx_{loader}")
    name = key[:-len("_epoch")] if key.endswith("_epoch") and key not in results.loader_of else key
    return results.loader_of.get(name) in (None, loader)


def _run_loader(trainer: Trainer, plan: LoaderPlan, limit: int | float, step_fn: StepCall, prefix: str, dl_idx: int,
                multiple: bool, counts: BatchProgress | None = None, final: bool = False, passed: int = 0) -> None:
    hooks, move, results = trainer.stage_run.hooks, BatchMover(trainer), trainer.stage_run.active_results
    trainer.stage_run.log_suffix = f"/dataloader_idx_{dl_idx}" if multiple else ""
    extra = (dl_idx,) if multiple else ()  # dataloader_idx only with several loaders (Lightning's calls)
    results.current_loader = dl_idx
    try:
        for batch_idx, batch in enumerate(batches_of(trainer, plan, trainer.current_epoch, limit, prefix,
                                                     "[_EvaluationLoop]")):
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


def batches_of(
    trainer: Trainer, plan: LoaderPlan, epoch: int, limit: int | float, prefix: str, loop: str
) -> Iterator[Any]:
    """A loader's batches up to ``limit`` (none fetched past it), each fetch timed by an enabled profiler under
    Lightning's name (``[_EvaluationLoop].val_next``)."""
    batches = plan.iterate(epoch)
    if trainer.profiler.enabled:
        name = "val" if prefix == "validation" else prefix
        batches = trainer.profiler.profile_iterable(iter(batches), f"{loop}.{name}_next")
    return batches if limit == math.inf else islice(batches, int(limit))


def _run_iterator_steps(trainer: Trainer, plans: list[LoaderPlan], limits: list[int | float], step_fn: StepCall,
                        prefix: str, multiple: bool, counts: _Progress | None, loop: str) -> list[list[Any]]:
    """The ``dataloader_iter`` flavour (``step_arguments.py``): one iterator over every loader in turn; the step
    takes its own batches, the batch hooks see the last batch taken (before the first: ``None``, 0, 0). Returns
    the steps' outputs per loader (of the last batch each step took)."""
    hooks, results = trainer.stage_run.hooks, trainer.stage_run.active_results
    epoch = trainer.current_epoch if prefix != "predict" else 0
    source = ((batch, batch_idx, dl_idx) for dl_idx, (plan, limit) in enumerate(zip(plans, limits))
              for batch_idx, batch in enumerate(batches_of(trainer, plan, epoch, limit, prefix, loop)))
    outputs: list[list[Any]] = [[] for _ in plans]
    try:
        for it in steps(source, sum(limits)):
            extra = (it.dataloader_idx,) if multiple else ()
            if counts is not None:
                counts.increment_ready()
            hooks.call(f"on_{prefix}_batch_start", it.batch, it.batch_idx, *extra)
            if counts is not None:
                counts.increment_started()
            try:
                out = step_fn(it, it.batch_idx, ())
            except StopIteration:
                break
            if counts is not None:
                counts.increment_processed()
                if hasattr(counts, "is_last_batch"):
                    counts.is_last_batch = it.done
            extra = (it.dataloader_idx,) if multiple else ()
            trainer.stage_run.log_suffix = f"/dataloader_idx_{it.dataloader_idx}" if multiple else ""
            if results is not None:
                results.current_loader = it.dataloader_idx
            hooks.call(f"on_{prefix}_batch_end", out, it.batch, it.batch_idx, *extra)
            if counts is not None:
                counts.increment_completed()
            outputs[it.dataloader_idx].append(out)
    finally:
        trainer.stage_run.log_suffix = ""
        if results is not None:
            results.current_loader = None
    return outputs


def reloaded(
    trainer: Trainer, reload: Callable[[], tuple[list[LoaderPlan], list[int | float]]] | None, plans: list[LoaderPlan],
    limits: list[int | float],
) -> tuple[list[LoaderPlan], list[int | float]]:
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
    move = BatchMover(trainer)
    outputs: list[list[Any]] = []
    multiple = len(plans) > 1
    keep = trainer.predict_loop.return_predictions
    counts = trainer.predict_loop.batch_progress
    counts.reset_on_run()
    outer.__enter__()
    try:  # whatever raises from here on (a hook included), the grad mode and the modules' modes are given back
        module.on_predict_model_eval()
        hooks.call("on_predict_start")
        plans, limits = reloaded(trainer, reload, plans, limits)
        multiple = len(plans) > 1
        step_fn, by_iterator = evaluation_step_caller(module, "predict", "predict", step_fn, multiple)
        step_fn = profiled_step(trainer, "predict_step", step_fn, limits)
        hooks.call("on_predict_epoch_start")
        with no_grad_context(trainer, False):
            if by_iterator:
                outputs = _run_iterator_steps(trainer, plans, limits, step_fn, "predict", multiple, counts,
                                              "[_PredictionLoop]")
                outputs = outputs if keep else [[] for _ in outputs]
            for dl_idx, (plan, limit) in enumerate(zip(plans, limits) if not by_iterator else ()):
                loader_out: list[Any] = []
                extra = (dl_idx,) if multiple else ()
                for batch_idx, batch in enumerate(batches_of(trainer, plan, 0, limit, "predict", "[_PredictionLoop]")):
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


def profiled_step(trainer: Trainer, name: str, call: StepCall, limits: list[int | float]) -> StepCall:
    """With an enabled profiler: each step timed as ``[Strategy]<class>.<name>``, Lightning's action, and in
    ``validate``/``test``/``predict`` a step of the profiler's schedule after it (the PyTorch profiler records them
    too); a fit's validation does not move the schedule, whose window counts training steps as Lightning's does. Else
    ``call`` itself."""
    profiler = trainer.profiler
    if not profiler.enabled:
        return call
    timed = profiler.wrap(f"[Strategy]{type(trainer.strategy).__name__}.{name}", call)
    if trainer.state.fn == TrainerFn.FITTING:
        return timed
    profiler.plan_steps(sum(limits))  # a short stage records every step (the PyTorch profiler's)

    def run(batch: Any, batch_idx: int, extra: tuple[int, ...]) -> Any:
        out = timed(batch, batch_idx, extra)
        profiler.step()
        return out

    return run


def print_results(stage: str, results: list[dict[str, float]]) -> None:
    """A small table of the final metrics, like Lightning prints after validate/test (none when nothing was logged)."""
    if not any(results):
        return
    for i, metrics in enumerate(results):
        title = f"{stage} metrics" + (f" (dataloader {i})" if len(results) > 1 else "")
        width = max([len(k) for k in metrics] + [len(title)])
        print(f"{title:<{width}}  value")
        for key, value in sorted(metrics.items()):
            print(f"{key:<{width}}  {value:.6g}")
