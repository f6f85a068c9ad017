"""Profilers: the simple table, cProfile stats, and a torch.profiler trace file that parses."""

from __future__ import annotations

import json

import pytest

from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.errors import MisconfigurationError
from trainer.profilers import AdvancedProfiler, PassThroughProfiler, PyTorchProfiler, SimpleProfiler


def test_simple_profiler_times_the_loop_and_hooks(tmp_path, capsys):
    profiler = SimpleProfiler(dirpath=tmp_path, filename="perf")
    trainer = Trainer(**quiet(profiler=profiler, max_steps=6, val_check_interval=3, enable_progress_bar=True))
    trainer.fit(Regression(), loader(), loader(n=16))
    report = (tmp_path / "fit-perf.txt").read_text()
    for action in ("run_training_batch", "train_dataloader_next", "run_training_epoch", "run_validation",
                   "[Strategy]SingleDeviceStrategy.training_step", "[Strategy]SingleDeviceStrategy.backward",
                   "[Strategy]SingleDeviceStrategy.optimizer_step", "[Callback]ProgressBar.on_train_batch_end"):
        assert action in report, report
    row = next(line for line in report.splitlines() if line.startswith("|  run_training_batch "))
    assert [cell.strip() for cell in row.split("|")][3] == "6"  # calls (Lightning's table layout)
    assert "FIT Profiler Report" in capsys.readouterr().out  # the table is printed on exit


def test_profiler_by_name_and_bad_name():
    assert isinstance(Trainer(**quiet(profiler="simple")).profiler, SimpleProfiler)
    assert isinstance(Trainer(**quiet(profiler="advanced")).profiler, AdvancedProfiler)
    assert isinstance(Trainer(**quiet(profiler="pytorch")).profiler, PyTorchProfiler)
    assert isinstance(Trainer(**quiet()).profiler, PassThroughProfiler)
    with pytest.raises(MisconfigurationError, match="'simple', 'advanced', 'pytorch'"):
        Trainer(**quiet(profiler="fancy"))


def test_advanced_profiler_reports_functions(tmp_path):
    profiler = AdvancedProfiler(dirpath=tmp_path, filename="adv")
    Trainer(**quiet(profiler=profiler, max_steps=3)).fit(Regression(), loader())
    report = (tmp_path / "fit-adv.txt").read_text()
    assert "Profile stats for: run_training_batch" in report
    assert "Profile stats for: [Strategy]SingleDeviceStrategy.training_step" in report
    assert "cumulative" in report and "training_step" in report


def test_pytorch_profiler_writes_a_trace_that_parses(tmp_path, capsys):
    profiler = PyTorchProfiler(dirpath=tmp_path / "trace", wait=1, warmup=1, active=2)
    # the sanity check's 2 steps and the validation steps are timed but leave the training window where it was
    Trainer(**quiet(profiler=profiler, max_steps=8, num_sanity_val_steps=2, val_check_interval=3,
                    limit_val_batches=2)).fit(Regression(), loader(), loader())
    traces = list((tmp_path / "trace").glob("rank0.*.pt.trace.json"))
    assert len(traces) == 1
    trace = json.loads(traces[0].read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "run_training_batch" in names and "[Strategy]SingleDeviceStrategy.backward" in names
    assert any(name and name.startswith("aten::") for name in names)
    steps = {n for n in names if n and n.startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3"}  # the window: after 1 wait and 1 warmup step
    assert "[Strategy]SingleDeviceStrategy.validation_step" in names
    out = capsys.readouterr().out
    assert "PyTorch profiler report (fit, rank 0" in out and "Self CPU" in out


def test_pytorch_profiler_only_on_its_ranks(tmp_path):
    profiler = PyTorchProfiler(dirpath=tmp_path / "trace", ranks=[1])
    Trainer(**quiet(profiler=profiler, max_steps=4)).fit(Regression(), loader())
    assert not (tmp_path / "trace").exists()
    with pytest.raises(ValueError, match="active"):
        PyTorchProfiler(active=0)


def test_pytorch_profiler_with_fewer_steps_than_the_window(tmp_path):
    profiler = PyTorchProfiler(dirpath=tmp_path / "trace", wait=5, warmup=5, active=5)
    Trainer(**quiet(profiler=profiler, max_steps=2)).fit(Regression(), loader())  # finishes cleanly


def test_pytorch_profiler_records_evaluation_steps_and_a_short_run(tmp_path):
    """``test``/``validate``/``predict`` step the profiler's schedule too (they recorded nothing before), and a
    stage shorter than the window records every step, with Lightning's warning, instead of nothing."""
    from trainer.callbacks import EarlyStopping

    model = Regression()
    profiler = PyTorchProfiler(dirpath=tmp_path / "test")
    Trainer(**quiet(profiler=profiler, limit_test_batches=8)).test(model, loader(), verbose=False)
    names = {event.name for event in profiler.function_events}
    assert "[Strategy]SingleDeviceStrategy.test_step" in names
    profiler = PyTorchProfiler(dirpath=tmp_path / "short")
    with pytest.warns(UserWarning, match="default schedule will be overridden as there is not enough steps"):
        Trainer(**quiet(profiler=profiler, max_steps=1, limit_train_batches=1, limit_val_batches=1,
                        callbacks=[EarlyStopping("val_loss")])).fit(model, loader(), loader())
    names = {event.name for event in profiler.function_events}
    # every callback hook is timed while profiling, overridden or not (EarlyStopping has no on_validation_start)
    assert "[Strategy]SingleDeviceStrategy.training_step" in names and any(
        name.startswith("[Callback]EarlyStopping") and name.endswith(".on_validation_start") for name in names)
