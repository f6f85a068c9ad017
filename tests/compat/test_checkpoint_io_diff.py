"""Differential: a custom ``CheckpointIO`` wrapped in ``AsyncCheckpointIO`` through ``Trainer(plugins=[...])``
behaves the same for a user on Lightning 2.6.6 and on Relay (files kept, removals asked of the plugin,
``teardown`` called, what ``last.ckpt`` holds)."""

from __future__ import annotations

import pytest

from tests.compat.lightning_diff.harness import run_both

pytestmark = pytest.mark.timeout(300)


def test_async_custom_checkpoint_io_matches_lightning():
    lightning, relay = run_both(str(__import__("pathlib").Path(__file__).with_name("checkpoint_io_program.py")))
    assert relay == lightning
    assert lightning["files"] == ["epoch=0-step=6.ckpt", "epoch=0-step=8.ckpt", "last.ckpt"]
