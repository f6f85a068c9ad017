"""Lightning and Relay Trainers built from the same arguments: the same defaults where ``TrainerArguments`` says
they agree, and the same time-based ``val_check_interval``, each framework in its own process."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("trainer_arguments_program.py")

# Relay's own reading of these defaults (the loops use them as they are; Lightning: 1.0); max_epochs, min_epochs,
# min_steps (None until a fit fills them in) and fast_dev_run read as Lightning's
RELAY_READS = {"val_check_interval": None,
               **{f"limit_{s}_batches": None for s in ("train", "val", "test", "predict")}}


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=280)


def test_every_lightning_default_is_the_one_the_dataclass_records():
    import lightning.pytorch as pl

    from trainer.arguments.trainer_arguments import SAME, TrainerArguments, spec_of

    lightning = inspect.signature(pl.Trainer.__init__).parameters
    for f in dataclasses.fields(TrainerArguments):
        spec = spec_of(f)
        if spec.lightning is None:
            continue
        recorded = f.default if spec.lightning_default is SAME else spec.lightning_default
        given = lightning[spec.lightning or f.name].default
        assert given == recorded and type(given) is type(recorded), (f.name, given, recorded)


def test_what_a_default_trainer_reads_back(observed):
    lightning, relay = observed
    assert relay["default_root_dir_is_cwd"] and lightning["default_root_dir_is_cwd"]
    differs = {k for k in lightning["defaults"] if repr(relay["defaults"][k]) != repr(lightning["defaults"][k])}
    assert differs == set(RELAY_READS), sorted(differs)
    assert repr({k: relay["defaults"][k] for k in RELAY_READS}) == repr(RELAY_READS)


@pytest.mark.parametrize("key", [f"time_{form}_{every}" for form in ("string", "dict", "timedelta", "days")
                                 for every in (1, None)] + ["time_under_fast_dev_run"])
def test_time_based_val_check_interval_in_seconds(observed, key):
    lightning, relay = observed
    assert relay[key] == lightning[key]
    assert key == "time_under_fast_dev_run" or lightning[key] > 0


@pytest.mark.parametrize("key", ["bad_string", "bad_dict_key", "fraction_without_epochs"])
def test_bad_time_based_values_are_refused_as_lightning_refuses_them(observed, key):
    """Relay's error may be more specific, but every ``except`` that catches Lightning's catches it."""
    lightning, relay = observed[0][key], observed[1][key]
    assert "exception" in lightning and "exception" in relay, (lightning, relay)
    assert set(lightning["builtin_bases"]) <= set(relay["builtin_bases"]), (lightning, relay)
    assert relay["misconfiguration"] or not lightning["misconfiguration"], (lightning, relay)
    assert "val_check_interval" in relay["message"]
