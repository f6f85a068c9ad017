"""Differential tests: the same program on Lightning and on Relay must show a user the same things.

One process per framework runs every check of ``program.py`` (module-scoped fixture); each test compares
one observation. Skipped where Lightning is not installed (CI installs it).
"""

from __future__ import annotations

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def observed():
    from tests.lightning_diff.harness import run_both

    return run_both("program.py", timeout=800)


def _pair(observed, key):
    lightning, relay = observed
    assert key in lightning and key in relay, f"check {key!r} did not run: {sorted(lightning)} / {sorted(relay)}"
    return lightning[key], relay[key]


@pytest.mark.parametrize("run", ["fit", "validate", "test", "predict", "fit_saving", "fit_resuming"])
def test_hook_order(observed, run):
    lightning, relay = _pair(observed, "hooks")
    assert "exception" not in lightning, lightning
    assert relay.get(run) == lightning[run]


def test_hooks_overridden_on_the_instance_and_no_val_dataloader(observed):
    lightning, relay = _pair(observed, "instance_hooks")
    assert lightning["calls"][0] == "assigned on_train_epoch_start" and lightning["validation_batches"] == []
    assert relay == lightning


def test_rank_zero_only_rank_is_set_on_import(observed):
    lightning, relay = _pair(observed, "rank_zero_at_import")
    assert lightning == 0 and relay == lightning
