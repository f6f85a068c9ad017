"""``TrainerArguments`` is the one source of the Trainer's arguments: the signature, the checks, the Hydra schema,
``--help`` and the API table all agree with it, and a field added only to it shows up in each generated place."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from trainer import Trainer
from trainer.arguments import checks
from trainer.arguments.trainer_arguments import TrainerArguments, argument, spec_of
from trainer.callbacks import EarlyStopping
from trainer.errors import MisconfigurationError

ROOT = Path(__file__).resolve().parents[2]
FIELDS = dataclasses.fields(TrainerArguments)


def _table_generator():
    """docs/make_lightning_api.py, imported as a module (it is a script)."""
    if "make_lightning_api" not in sys.modules:
        spec = importlib.util.spec_from_file_location("make_lightning_api", ROOT / "docs" / "make_lightning_api.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["make_lightning_api"] = module
    return sys.modules["make_lightning_api"]


def _help(overrides: list[str]) -> str:
    from trainer.cli.help import help_text
    from trainer.cli.schema import register_configs

    register_configs()
    return help_text(str(ROOT / "configs"), "config", overrides)


# --- the signature IDEs, inspect.signature and jsonargparse read -----------------------------------------------------
def test_the_signature_lists_every_field_with_its_default_and_type():
    params = list(inspect.signature(Trainer).parameters.values())
    # the declared signature leaves out **unknown (it only words the misspelt-argument error), so tools that read the
    # signature (LightningCLI's --trainer.* options and help) see exactly the arguments a Trainer takes
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in params)
    assert [p.name for p in params] == [f.name for f in FIELDS]
    for p, f in zip(params, FIELDS):
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, p.name
        assert p.default == f.default and type(p.default) is type(f.default), (p.name, p.default, f.default)
        assert p.annotation.replace(" ", "") == str(f.type).replace(" ", ""), (p.name, p.annotation, f.type)


def test_the_signature_resolves_for_tools_that_evaluate_annotations():
    import typing

    hints = typing.get_type_hints(Trainer.__init__)
    assert timedelta in typing.get_args(hints["val_check_interval"])
    assert set(hints) >= {f.name for f in FIELDS}


def test_jsonargparse_builds_a_trainer_from_the_signature():
    """What LightningCLI does: command-line values typed by the signature's annotations (an int limit stays an int,
    a time-based interval passes as a string)."""
    from tests.optional import need

    need("jsonargparse", "LightningCLI-style parsing of the Trainer's signature")
    from jsonargparse import ArgumentParser

    parser = ArgumentParser()
    parser.add_class_arguments(Trainer, "trainer")
    cfg = parser.parse_args(["--trainer.limit_train_batches=2", "--trainer.limit_val_batches=0.5",
                             "--trainer.val_check_interval=00:00:10:00", "--trainer.logger=false"])
    assert cfg.trainer.limit_train_batches == 2 and isinstance(cfg.trainer.limit_train_batches, int)
    trainer = (getattr(parser, "instantiate", None) or parser.instantiate_classes)(cfg).trainer
    assert trainer.limit_train_batches == 2 and trainer.limit_val_batches == 0.5
    assert trainer._val_check_time_interval == 600.0 and trainer.loggers == []


# --- checks -------------------------------------------------------------------------------------------------------------
EXAMPLE_NAMES = {"EarlyStopping": EarlyStopping}


def test_every_example_in_the_error_messages_is_valid():
    from plugins.environments.slurm import SLURMEnvironment

    for f in FIELDS:
        value = eval(spec_of(f).example, {**EXAMPLE_NAMES, "SLURMEnvironment": SLURMEnvironment})
        TrainerArguments(**{f.name: value})


@pytest.mark.parametrize("name", [f.name for f in FIELDS if spec_of(f).check is not checks.anything])
def test_every_checked_argument_refuses_a_wrong_type_naming_itself_and_the_value(name):
    with pytest.raises(MisconfigurationError) as err:
        TrainerArguments(**{name: object()})
    assert f"Trainer({name}=" in str(err.value) and "object object" in str(err.value), str(err.value)


def test_a_refused_value_gets_what_is_valid_and_an_example():
    with pytest.raises(MisconfigurationError) as err:
        Trainer(accumulate_grad_batches=0)
    assert str(err.value) == ("Trainer(accumulate_grad_batches=0) is not valid: accumulate_grad_batches must be an int "
                              ">= 1. For example: Trainer(accumulate_grad_batches=4).")


def test_values_are_kept_normalized_on_the_trainer(tmp_path):
    trainer = Trainer(default_root_dir=tmp_path, logger=False, fast_dev_run=True, max_time={"minutes": 2})
    assert trainer.fast_dev_run == 1 and trainer.max_time == 120.0 and trainer.default_root_dir == str(tmp_path)
    assert trainer.args.fast_dev_run == 1  # the checked arguments, as given
    stored = [f.name for f in FIELDS if spec_of(f).stored]
    assert not [n for n in stored if hasattr(Trainer, n)], "a stored argument would hide behind a class property"


# --- val_check_interval on time (Lightning's DD:HH:MM:SS, timedelta, dict) ----------------------------------------------
@pytest.mark.parametrize("value, seconds", [
    ("00:00:10:00", 600.0), ("01:02:03:04", 93784.0), (timedelta(seconds=30), 30.0), ({"minutes": 10}, 600.0),
    ({"hours": 1, "minutes": 30}, 5400.0),
])
def test_time_based_val_check_interval_is_accepted_and_kept_in_seconds(tmp_path, value, seconds):
    for every_n_epoch in (1, None):  # time needs no epochs, unlike a fraction
        trainer = Trainer(default_root_dir=tmp_path, logger=False, val_check_interval=value,
                          check_val_every_n_epoch=every_n_epoch)
        assert trainer._val_check_time_interval == seconds and trainer.val_check_interval is None
    assert Trainer(default_root_dir=tmp_path, val_check_interval=value, fast_dev_run=2)._val_check_time_interval is None


def test_batch_based_val_check_interval_has_no_time(tmp_path):
    trainer = Trainer(default_root_dir=tmp_path, logger=False, val_check_interval=0.5)
    assert trainer.val_check_interval == 0.5 and trainer._val_check_time_interval is None


@pytest.mark.parametrize("value, words", [
    ("10:00", ["val_check_interval='10:00'", "'DD:HH:MM:SS'", "For example"]),
    ("00:00:00:00", ["positive duration"]),
    ({"minute": 10}, ["val_check_interval", "'minute'", "timedelta keywords"]),
    (1.5, ["val_check_interval", "[0.0, 1.0]"]),
])
def test_bad_time_based_val_check_interval(tmp_path, value, words):
    with pytest.raises(MisconfigurationError) as err:
        Trainer(default_root_dir=tmp_path, val_check_interval=value)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


# --- the Hydra schema -------------------------------------------------------------------------------------------------
def test_the_schema_has_every_trainer_key_and_the_other_arguments_are_config_groups():
    from trainer.cli.schema import TrainerConfig

    schema = {f.name: f.default for f in dataclasses.fields(TrainerConfig)}
    for f in FIELDS:
        group = spec_of(f).group
        if group == "trainer":
            assert f.name in schema and schema[f.name] == f.default, f.name
        else:
            assert f.name not in schema and (ROOT / "configs" / group).is_dir(), (f.name, group)
    assert set(schema) <= {f.name for f in FIELDS}


def test_a_composed_trainer_node_is_valid_arguments():
    """Every key the schema lets through is an argument, time-based intervals included (as OmegaConf values)."""
    from hydra import compose, initialize_config_dir

    from trainer.cli.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("config", overrides=["trainer.val_check_interval={minutes:10}", "trainer.max_time=00:01:00:00",
                                            "trainer.overfit_batches=2"])
    args = TrainerArguments(**cfg.trainer)
    assert args.val_check_interval == timedelta(minutes=10) and args.max_time == 3600.0 and args.overfit_batches == 2


def test_every_example_is_an_override_that_works_on_the_command_line():
    """A refused ``trainer.*`` value ends with ``Override: trainer.<name>=<example>``: that override composes and
    the Trainer takes it."""
    from hydra import compose, initialize_config_dir

    from trainer.arguments.trainer_arguments import ArgumentValueError
    from trainer.cli.schema import override_for, register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        for f in FIELDS:
            if spec_of(f).group != "trainer":
                continue
            override = override_for(ArgumentValueError("", f.name, spec_of(f).example)).removeprefix(" Override: ")
            assert override.startswith(f"trainer.{f.name}="), (f.name, override)
            TrainerArguments(**compose("config", overrides=[override]).trainer)


def test_a_refused_value_on_the_command_line_is_one_line_with_an_override(tmp_path):
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "trainer", "trainer.accumulate_grad_batches=0"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "accumulate_grad_batches must be an int >= 1" in done.stderr
    assert done.stderr.rstrip().endswith("Override: trainer.accumulate_grad_batches=4"), done.stderr


# --- --help and the API table ------------------------------------------------------------------------------------------
def test_help_lists_every_argument_with_its_value_here():
    out = _help(["trainer.max_epochs=7", "environment=slurm"])
    lines = out.split("== Trainer arguments", 1)[1].splitlines()
    for f in FIELDS:
        spec = spec_of(f)
        key = f"trainer.{f.name}=" if spec.group == "trainer" else f"{spec.group}="
        assert any(line.strip().startswith(key) and spec.help in line for line in lines), f.name
    assert any(line.strip().startswith("trainer.max_epochs=7 ") for line in lines)
    assert any(line.strip().startswith("environment=slurm ") for line in lines)


def test_the_api_table_lists_every_argument():
    text = (ROOT / "docs" / "lightning_api.md").read_text()
    lightning_part, relay_part = text.split("## `Trainer` arguments", 1)[1].split("## Relay's own `Trainer` arguments")
    for f in FIELDS:
        spec = spec_of(f)
        part = relay_part if spec.lightning is None else lightning_part
        assert re.search(rf"^\| `{spec.lightning or f.name}` \|", part, re.MULTILINE), f.name


# --- one new field, everywhere ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class WithNewFields(TrainerArguments):
    warmup_fraction: float = argument(0.0, "Warm up over this fraction of the steps", "a number >= 0", "0.1",
                                      checks.non_negative_number)
    relay_knob: bool = argument(False, "A setting only Relay has", "True or False", "True", checks.boolean,
                                lightning=None)


def test_a_field_added_only_to_the_dataclass_shows_up_in_every_generated_place():
    from trainer.cli.help import argument_lines
    from trainer.cli.schema import trainer_config

    schema = {f.name: f for f in dataclasses.fields(trainer_config(WithNewFields))}
    assert schema["warmup_fraction"].default == 0.0 and schema["relay_knob"].type is bool
    lines = argument_lines(None, {}, WithNewFields)
    assert any(line.strip().startswith("trainer.warmup_fraction=0.0 ") for line in lines)
    assert any(line.strip().startswith("trainer.relay_knob=false ") for line in lines)
    generator = _table_generator()
    rows = generator.trainer_argument_rows({"max_epochs": None, "warmup_fraction": 0.0}, WithNewFields)
    assert ("warmup_fraction", "supported", "") in rows
    assert ("relay_knob", "False", "A setting only Relay has") in generator.relay_only_argument_rows(WithNewFields)
    with pytest.raises(MisconfigurationError, match=r"Trainer\(warmup_fraction=-1\).*a number >= 0"):
        WithNewFields(warmup_fraction=-1)


def test_the_table_generator_stops_on_a_lightning_default_the_field_does_not_record():
    with pytest.raises(SystemExit, match="max_epochs.*lightning_default"):
        _table_generator().trainer_argument_rows({"max_epochs": 1000})
