"""Lightning's engine names (loops, progress, closures, fetchers, samplers, launchers, connectors' helpers) as Relay
serves them (trainer/lightning_compat/impl/loops_*.py), compared call for call with Lightning 2.6.6's own objects
in the same process; the loop and launcher classes are Relay's own, and the connector internals raise."""

from __future__ import annotations

import importlib
import types
import warnings

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from tests.optional import need
from trainer.lightning_compat import install, uninstall
from trainer.lightning_compat.alias import LightningAlias
from trainer.lightning_compat.impl import (
    loops_closure,
    loops_connectors,
    loops_data,
    loops_fetchers,
    loops_launchers,
    loops_optimizer,
    loops_progress,
    loops_samplers,
)


def real(module: str) -> types.ModuleType:
    """Lightning's own module (the installed package, not the zero-edit mode's alias)."""
    need("lightning", "compared against Lightning's own objects")
    uninstall()
    found = importlib.import_module(module)
    assert not isinstance(found, LightningAlias)
    return found


def _drive(progress, calls):
    for name in calls:
        getattr(progress, name)()
    return progress.state_dict()


def test_progress_trackers_count_reset_and_restore_as_lightnings():
    theirs = real("lightning.pytorch.loops.progress")
    ours = loops_progress
    calls = ["increment_ready", "increment_started", "increment_processed", "increment_completed", "increment_ready",
             "increment_started", "reset_on_restart", "increment_ready", "reset_on_run"]
    for cls in ("_Progress", "_BatchProgress"):
        assert _drive(getattr(ours, cls)(), calls) == _drive(getattr(theirs, cls)(), calls)
    for name in ("_OptimizerProgress", "_OptimizationProgress", "_SchedulerProgress"):
        a, b = getattr(ours, name)(), getattr(theirs, name)()
        assert a.state_dict() == b.state_dict()
    for tracker in ("_ReadyCompletedTracker", "_StartedTracker", "_ProcessedTracker"):
        a, b = getattr(ours, tracker)(), getattr(theirs, tracker)()
        for t in (a, b):
            t.increment_by(3)
            t.ready += 1
            t.reset_on_restart()
        assert a.state_dict() == b.state_dict()
        ours_p = ours._Progress.from_defaults(getattr(ours, tracker), ready=2, completed=1)
        theirs_p = theirs._Progress.from_defaults(getattr(theirs, tracker), ready=2, completed=1)
        for call in ("increment_started", "increment_processed"):
            outcome = []
            for p in (ours_p, theirs_p):
                try:
                    getattr(p, call)()
                    outcome.append(p.state_dict())
                except TypeError as err:
                    outcome.append(str(err))
            assert outcome[0] == outcome[1]
    with pytest.raises(ValueError, match="same class"):
        ours._Progress(ours._ReadyCompletedTracker(), ours._StartedTracker())
    batch = ours._BatchProgress.from_state_dict(theirs._BatchProgress(is_last_batch=True).state_dict())
    assert batch.is_last_batch and batch.total == ours._ProcessedTracker()


def _nested(module):
    class Child(module._Loop):
        def __init__(self):
            super().__init__(None)
            self.batch_progress = module._BatchProgress()

    class Parent(module._Loop):
        def __init__(self):
            super().__init__(None)
            self.child = Child()
            self.epoch_progress = module._Progress()

        def on_save_checkpoint(self):
            return {"seen": 3}

        def on_load_checkpoint(self, state_dict):
            self.loaded = state_dict

    return Parent()


def test_loop_state_dict_spans_progress_and_child_loops_as_lightnings():
    progress = real("lightning.pytorch.loops.progress")
    theirs = _nested(types.SimpleNamespace(_Loop=real("lightning.pytorch.loops.loop")._Loop,
                                           _BatchProgress=progress._BatchProgress, _Progress=progress._Progress))
    ours = _nested(loops_progress)
    for loop in (ours, theirs):
        loop.child.batch_progress.increment_ready()
        loop.epoch_progress.increment_completed()
    assert ours.state_dict() == theirs.state_dict()
    fresh = _nested(loops_progress)
    fresh.load_state_dict(theirs.state_dict())
    assert fresh.state_dict() == theirs.state_dict() and fresh.loaded == {"seen": 3}
    assert fresh.restarting and fresh.child.restarting and fresh.is_resuming
    fresh.on_iteration_done()
    assert not fresh.restarting and fresh.child.restarting
    loops_data._reset_progress(fresh)
    assert fresh.child.batch_progress.total.ready == 0


def test_closure_and_step_results_as_lightnings():
    theirs_auto = real("lightning.pytorch.loops.optimization.automatic")
    theirs_manual = real("lightning.pytorch.loops.optimization.manual")
    loss = torch.tensor(4.0, requires_grad=True)
    for output in (loss, {"loss": loss, "x": 1}, None):
        a = loops_closure.ClosureResult.from_training_step_output(output, 2)
        b = theirs_auto.ClosureResult.from_training_step_output(output, 2)
        assert repr(a.asdict()) == repr(b.asdict())
    for output in (loss, {"loss": loss, "y": 2}, None):
        a = loops_closure.ManualResult.from_training_step_output(output).asdict()
        b = theirs_manual.ManualResult.from_training_step_output(output).asdict()
        assert repr(a) == repr(b)
    for bad in ({"x": 1}, "text"):
        errors = []
        for cls in (loops_closure.ClosureResult, theirs_auto.ClosureResult):
            with pytest.raises(Exception) as caught:
                cls.from_training_step_output(bad)
            errors.append(str(caught.value))
        assert errors[0] == errors[1]
    calls = []
    closure = loops_closure.Closure(lambda: loops_closure.ClosureResult(loss * 2), lambda l: calls.append("backward"),
                                    lambda: calls.append("zero_grad"))
    assert closure().item() == 8.0 and calls == ["zero_grad", "backward"]
    assert closure.consume_result().loss.item() == 8.0
    with pytest.raises(Exception, match="The closure hasn't been executed"):
        closure.consume_result()


def _fetch_trace(fetcher_cls, combined):
    fetcher = fetcher_cls(prefetch_batches=2) if "Prefetch" in fetcher_cls.__name__ else fetcher_cls()
    fetcher.setup(combined)
    trace = []
    for batch in fetcher:
        trace.append((batch[0] if isinstance(batch, tuple) else "iter", fetcher.fetched, fetcher.done))
        if not isinstance(batch, tuple):
            trace.append(next(batch, ("end", "end", "end"))[1:])
    return trace


@pytest.mark.parametrize("sized", [True, False])
def test_fetchers_report_done_at_the_last_batch_as_lightnings(sized):
    theirs = real("lightning.pytorch.loops.fetchers")
    their_combined = real("lightning.pytorch.utilities").CombinedLoader
    from trainer.utilities import CombinedLoader

    def data():
        return [1, 2, 3] if sized else iter([1, 2, 3])

    for name in ("_PrefetchDataFetcher", "_DataLoaderIterDataFetcher"):
        ours = _fetch_trace(getattr(loops_fetchers, name), CombinedLoader(data()))
        assert ours == _fetch_trace(getattr(theirs, name), their_combined(data()))
    with pytest.raises(ValueError):
        loops_fetchers._PrefetchDataFetcher(-1)


@pytest.mark.parametrize(("n", "replicas", "shuffle"), [(10, 3, False), (10, 3, True), (2, 2, False), (7, 4, True)])
def test_prediction_samplers_shard_without_repeats_as_lightnings(n, replicas, shuffle):
    theirs = real("lightning.pytorch.overrides.distributed")
    for rank in range(replicas):
        a = loops_samplers.UnrepeatedDistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle)
        b = theirs.UnrepeatedDistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle)
        assert list(a) == list(b) and len(a) == len(b)
        wa = loops_samplers.UnrepeatedDistributedSamplerWrapper(SequentialSampler(range(n)), num_replicas=replicas,
                                                                rank=rank, shuffle=False)
        assert list(wa) == list(theirs.UnrepeatedDistributedSamplerWrapper(
            SequentialSampler(range(n)), num_replicas=replicas, rank=rank, shuffle=False))
    ours = loops_samplers._IndexBatchSamplerWrapper(BatchSampler(SequentialSampler(range(n)), 3, False))
    them = theirs._IndexBatchSamplerWrapper(BatchSampler(SequentialSampler(range(n)), 3, False))
    assert list(ours) == list(them) and ours.seen_batch_indices == them.seen_batch_indices
    assert ours.batch_size == 3 and len(ours) == len(them)
    nested = {"a": [torch.ones(1), (torch.zeros(2),)], "b": 3}
    assert len(list(loops_samplers._find_tensors(nested))) == len(list(theirs._find_tensors(nested))) == 2


def test_data_and_loop_helpers_as_lightnings():
    from trainer.states import RunningStage

    dc = real("lightning.pytorch.trainer.connectors.data_connector")
    lu = real("lightning.pytorch.loops.utilities")
    their_stage = real("lightning.pytorch.trainer.states").RunningStage
    for length, limit in [(10, 0.5), (10, 3), (float("inf"), 1.0), (float("inf"), 4), (0, 0.5), (10, 0.0)]:
        assert loops_data._parse_num_batches(RunningStage.TRAINING, length, limit) == \
            dc._parse_num_batches(their_stage.TRAINING, length, limit)
    for length, limit in [(float("inf"), 0.5), (10, 0.01)]:
        errors = []
        for fn, stage in ((loops_data._parse_num_batches, RunningStage.VALIDATING),
                          (dc._parse_num_batches, their_stage.VALIDATING)):
            with pytest.raises(Exception) as caught:
                fn(stage, length, limit)
            errors.append(str(caught.value))
        assert errors[0] == errors[1]
    holder = types.SimpleNamespace(callbacks=[])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in [(None, -1, None, None), (5, -1, None, None), (None, 10, 2, None), (None, -1, None, 3)]:
            assert loops_data._parse_loop_limits(*args, holder) == lu._parse_loop_limits(*args, holder)
    for current, maximum in [(3, -1), (3, 3), (2, 3)]:
        assert loops_data._is_max_limit_reached(current, maximum) == lu._is_max_limit_reached(current, maximum)
    with pytest.raises(ValueError, match="The loss returned in `training_step` is"):
        loops_data.check_finite_loss(torch.tensor(float("nan")))
    their_fn = real("lightning.pytorch.trainer.states").TrainerFn
    from trainer.states import TrainerFn

    for fn in ("fit", "validate"):
        messages = []
        for module, trainer_fn in ((loops_data, TrainerFn(fn)), (dc, their_fn(fn))):
            with pytest.raises(TypeError) as caught:
                module._check_dataloader_iterable(5, module._DataLoaderSource(5, "train_dataloader"), trainer_fn)
            messages.append(str(caught.value))
        assert messages[0] == messages[1]
    loops_data._check_dataloader_iterable([1], loops_data._DataLoaderSource([1], "x"), TrainerFn.FITTING)
    assert loops_data._request_dataloader(loops_data._DataLoaderSource([1, 2], "val_dataloader")) == [1, 2]


def test_fx_validator_sync_and_metadata_as_lightnings():
    fx = real("lightning.pytorch.trainer.connectors.logger_connector.fx_validator")._FxValidator
    result = real("lightning.pytorch.trainer.connectors.logger_connector.result")
    assert loops_connectors._FxValidator.functions == fx.functions
    for hook, step, epoch in [("training_step", None, None), ("validation_step", None, None),
                              ("on_train_epoch_end", True, None), ("setup", None, None), ("nope", None, None)]:
        outcome = []
        for validator in (loops_connectors._FxValidator, fx):
            try:
                outcome.append(validator.check_logging_and_get_default_levels(hook, step, epoch))
            except Exception as err:
                outcome.append((type(err).__name__, str(err)))
        assert outcome[0] == outcome[1]

    def total(value, reduce_op=None, group=None):
        return (value, reduce_op, group)

    for should, zero_only in [(True, False), (False, False), (True, True)]:
        ours = loops_connectors._Sync(total, _should=should, rank_zero_only=zero_only, _op="SUM")
        theirs = result._Sync(total, _should=should, rank_zero_only=zero_only, _op="SUM")
        assert ours(5) == theirs(5)
    for kwargs in [{"reduce_fx": "max"}, {"reduce_fx": "avg", "on_step": True}, {"reduce_fx": sum}]:
        a, b = loops_connectors._Metadata("training_step", "x", **kwargs), result._Metadata("training_step", "x", **kwargs)
        assert (a.reduce_fx, a.forked, a.forked_name(True), a.is_sum_reduction) == \
            (b.reduce_fx, b.forked, b.forked_name(True), b.is_sum_reduction)
    with pytest.raises(Exception, match="not useful"):
        loops_connectors._Metadata("training_step", "x", on_step=False, on_epoch=False)


def test_optimizer_configuration_helpers_as_lightnings():
    opt_module = real("lightning.pytorch.core.optimizer")
    layer = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    step = torch.optim.lr_scheduler.StepLR(opt, 1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
    forms = [opt, [opt], ([opt], [step]), ([opt], step), {"optimizer": opt, "lr_scheduler": step, "monitor": "m"},
             [{"optimizer": opt, "lr_scheduler": {"scheduler": step, "interval": "step"}}], "nonsense"]

    def outcome(module, conf):
        try:
            optimizers, schedulers, monitor = module._configure_optimizers(conf)
            configs = module._configure_schedulers_automatic_opt(schedulers, monitor)
            return optimizers, [vars(c) for c in configs], monitor
        except Exception as err:
            return type(err).__name__, str(err)

    for conf in forms:
        assert outcome(loops_optimizer, conf) == outcome(opt_module, conf)
    for schedulers, monitor in [([plateau], None), ([{"scheduler": plateau}], None), ([{"interval": "x", "scheduler": step}], None)]:
        assert outcome(loops_optimizer, {"optimizer": opt, "lr_scheduler": schedulers[0]}) == \
            outcome(opt_module, {"optimizer": opt, "lr_scheduler": schedulers[0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        manual = [{"scheduler": step, "monitor": "m", "interval": "step"}]
        assert [vars(c) for c in loops_optimizer._configure_schedulers_manual_opt(manual)] == \
            [vars(c) for c in opt_module._configure_schedulers_manual_opt(manual)]


def test_torch_flags_callbacks_list_and_global_state_as_lightnings():
    ac = real("lightning.pytorch.trainer.connectors.accelerator_connector")
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.benchmark)
    try:
        for kwargs in [{"deterministic": True}, {"deterministic": "warn", "benchmark": True}, {"benchmark": True},
                       {"deterministic": False}]:
            seen = []
            for fn in (loops_connectors._set_torch_flags, ac._set_torch_flags):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fn(**kwargs)
                seen.append((torch.are_deterministic_algorithms_enabled(),
                             torch.is_deterministic_algorithms_warn_only_enabled(), torch.backends.cudnn.benchmark))
            assert seen[0] == seen[1]
        torch.use_deterministic_algorithms(True)
        snapshot = loops_launchers._GlobalStateSnapshot.capture()
        torch.use_deterministic_algorithms(False)
        first = torch.rand(2)
        snapshot.restore()
        assert torch.are_deterministic_algorithms_enabled()
        snapshot.restore()
        assert torch.equal(torch.rand(2), first)
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark = before[2]
    from trainer.callbacks import EarlyStopping

    with pytest.raises(RuntimeError, match="more than one stateful callback of type `EarlyStopping`"):
        loops_connectors._validate_callbacks_list([EarlyStopping("a"), EarlyStopping("a")])
    loops_connectors._validate_callbacks_list([EarlyStopping("a"), EarlyStopping("b")])


def test_fit_loop_done_before_a_fit_as_lightnings():
    from trainer import Trainer

    their_trainer = real("lightning.pytorch").Trainer
    quiet = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False, "enable_model_summary": False}
    for max_epochs, max_steps in [(5, -1), (-1, 10), (0, -1), (-1, 0)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = Trainer(max_epochs=max_epochs, max_steps=max_steps, **quiet).fit_loop.done
            theirs = their_trainer(max_epochs=max_epochs, max_steps=max_steps, **quiet).fit_loop.done
        assert ours is theirs


def _rank_and_scaled(x, scale=1):
    import os

    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), x * scale


@pytest.mark.timeout(60)
def test_multiprocessing_launcher_runs_the_function_in_two_processes_and_returns_rank_zeros_result(monkeypatch):
    """Lightning's launcher built from a strategy is Relay's SpawnLauncher: two real workers (forked: fast)."""
    for name in ("MASTER_ADDR", "MASTER_PORT"):  # the launcher sets them, as Lightning's: not for later tests
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    launcher = loops_launchers._MultiProcessingLauncher(types.SimpleNamespace(num_processes=2), start_method="fork")
    assert launcher.launch(_rank_and_scaled, 3, scale=2) == (0, 2, 6)
    assert launcher.is_interactive_compatible


def test_relays_loops_and_launchers_answer_to_lightnings_classes():
    from plugins.launchers.spawn import SpawnLauncher
    from trainer import Trainer

    install(children=False)
    try:
        from lightning.pytorch.loops import _EvaluationLoop, _FitLoop, _PredictionLoop, _TrainingEpochLoop
        from lightning.pytorch.strategies.launchers import _MultiProcessingLauncher, _SubprocessScriptLauncher
        from lightning.pytorch.trainer.connectors.accelerator_connector import _AcceleratorConnector
        from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultCollection

        trainer = Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False)
        assert isinstance(trainer.fit_loop, _FitLoop) and isinstance(trainer.test_loop, _EvaluationLoop)
        assert isinstance(trainer.predict_loop, _PredictionLoop) and isinstance(trainer.fit_loop.epoch_loop, _TrainingEpochLoop)
        assert isinstance(SpawnLauncher(2), _MultiProcessingLauncher)
        assert not isinstance(SpawnLauncher(2), _SubprocessScriptLauncher)
        assert _FitLoop(trainer, max_epochs=3).max_epochs == 3
        launcher = _MultiProcessingLauncher(types.SimpleNamespace(num_processes=2), start_method="spawn")
        assert launcher.nprocs == 2 and not launcher.is_interactive_compatible
        with pytest.raises(ValueError, match="The start method 'nope' is not available"):
            _MultiProcessingLauncher(None, start_method="nope")
        from lightning.pytorch.plugins import DoublePrecisionPlugin as FromPlugins
        from lightning.pytorch.plugins.precision.double import DoublePrecision, DoublePrecisionPlugin

        assert FromPlugins is DoublePrecisionPlugin and issubclass(DoublePrecisionPlugin, DoublePrecision)
        with pytest.deprecated_call(match="The `DoublePrecisionPlugin` is deprecated. Use "
                                          "`lightning.pytorch.plugins.precision.DoublePrecision` instead."):
            DoublePrecisionPlugin()
        assert _AcceleratorConnector(devices=1)._devices_flag == 1  # built on its own: Relay resolves it
        for internal in (_ResultCollection,):
            with pytest.raises(NotImplementedError, match=f"{internal.__name__} is Lightning's Trainer internal"):
                internal()
    finally:
        uninstall()


def test_trainer_argument_helpers_and_samplers_as_lightnings():
    from trainer.lightning_compat.impl import loops_plugins, loops_trainer_calls as calls

    setup = real("lightning.pytorch.trainer.setup")
    dc = real("lightning.pytorch.trainer.connectors.data_connector")
    for value, name in [(None, "limit_val_batches"), (1, "limit_train_batches"), (0.25, "x"), (4.0, "x"), (7, "x"),
                        (1.5, "x"), (-1, "x")]:
        outcome = []
        for fn in (calls._determine_batch_limits, setup._determine_batch_limits):
            try:
                outcome.append(fn(value, name))
            except Exception as err:
                outcome.append(str(err))
        assert outcome[0] == outcome[1]
    for value in ["01:02:03:04", {"hours": 2}, "1:2:3", "a:b:c:d"]:
        outcome = []
        for fn in (calls._parse_time_interval_seconds, setup._parse_time_interval_seconds):
            try:
                outcome.append(fn(value))
            except Exception as err:
                outcome.append(str(err))
        assert outcome[0] == outcome[1]
    assert calls._get_default_dtype() is torch.float32
    loader = DataLoader(range(10), sampler=SequentialSampler(range(10)))
    for mode in (None, "predict"):
        from trainer.states import RunningStage

        ours = loops_data._get_distributed_sampler(loader, True, 0, RunningStage(mode) if mode else None,
                                                   num_replicas=3, rank=1)
        theirs = dc._get_distributed_sampler(loader, True, 0, real("lightning.pytorch.trainer.states").RunningStage(mode)
                                             if mode else None, num_replicas=3, rank=1)
        assert list(ours) == list(theirs)
    custom = DataLoader(range(10), sampler=list(range(9, -1, -1)))
    assert list(loops_data._get_distributed_sampler(custom, False, 0, num_replicas=2, rank=0)) == [9, 7, 5, 3, 1]
    norm = loops_plugins._BatchNormXd(3)
    assert norm(torch.randn(4, 3, 2, 2, 2)).shape == (4, 3, 2, 2, 2)

    class Inner(torch.nn.Module):
        automatic_optimization = True

        def forward(self, x):
            return x

        def training_step(self, x):
            return x * 2

    inner = Inner()
    wrapper = torch.nn.Sequential(inner)
    assert loops_plugins._ForwardRedirection()(wrapper, inner, "training_step", torch.ones(1)).item() == 2.0
    assert inner(torch.ones(1)).item() == 1.0  # forward is the module's own again
    with pytest.raises(NotImplementedError, match="_adjust_batch_size: a step of Lightning's tuner"):
        calls._SCALE_BATCH["_adjust_batch_size"](None)
