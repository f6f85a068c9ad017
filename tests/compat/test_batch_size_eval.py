"""BatchSizeFinder during ``validate``/``test`` (not through the Tuner): after the search, the evaluation runs on
loaders rebuilt with the size found, as Lightning 2.6.6 does (compared on the same program)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need

pytestmark = pytest.mark.timeout(300)


def test_evaluation_goes_on_with_the_batch_size_found():
    need("lightning", "compared against a real Lightning run")
    from tests.compat.lightning_diff.harness import run_both

    lightning, relay = run_both(Path(__file__).with_name("batch_size_eval_program.py"), timeout=240)
    assert relay == lightning
    assert relay["validate"]["batch_size"] == 8 and relay["validate"]["last_sizes"] == [8] * 6
