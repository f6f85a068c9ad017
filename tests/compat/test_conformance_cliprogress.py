"""The tqdm progress bar, the profilers' reports and LightningCLI, compared on Lightning 2.6.6 and on Relay's
zero-edit mode (found different by Lightning's own tests of them).

tests/compat/conformance_cliprogress_program.py runs every scenario once per framework (one process each, at the
same time); each test compares one observation and checks the expected value itself, so a mistake both share
cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"),
              need_mark("jsonargparse", "LightningCLI"), pytest.mark.timeout(300)]
PROGRAM = Path(__file__).with_name("conformance_cliprogress_program.py")


@pytest.fixture(scope="module")
def observed():
    from tests.compat.lightning_diff.harness import run_both

    return run_both(PROGRAM, timeout=240)


def same(observed, key):
    from tests.compat.lightning_diff.harness import same_observation

    return same_observation(observed, key)


def test_the_tqdm_bar_holds_real_bars_refreshed_every_refresh_rate_batches(observed):
    seen = same(observed, "tqdm_bar_state")
    # [n, total, leave, disable (closed)] of the train, validation and test bars
    assert seen["fit"] == [3, [5, 5, True, True], [2, 2, False, True], [4, 4, True, True], "Epoch 1: "]
    assert seen["leave_new_bar_per_epoch"] == [1, 4]  # leave=True: a new training bar per epoch
    assert seen["miniters"] == [4, 9]  # TQDM_MINITERS raises the refresh rate
    assert seen["print"] == [[["train 0"], {"end": "|"}], [["train 1"], {"end": "|"}]]  # self.print: tqdm.write
    assert seen["errors"][0].startswith("You added multiple progress bar callbacks")
    assert seen["errors"][1] == "Trainer was configured with `enable_progress_bar=False` but found `TQDMProgressBar`"


def test_the_simple_profilers_report_is_lightnings_table(observed):
    seen = same(observed, "simple_profiler_report")
    assert seen["extended"].startswith("Profiler Report")
    assert "|  Total                    \t|  -              \t|  6              \t|  10.0" in seen["extended"]
    assert "Num calls" not in seen["plain"]


def test_pytorch_profiler_table_kwargs_are_checked_and_used(observed):
    seen = same(observed, "pytorch_profiler_table_kwargs")
    assert seen == {"errors": ["Found invalid table_kwargs key: row_limit",
                               "Found invalid table_kwargs key: not_an_argument"], "tables": [True, True]}


def test_lightning_cli_optimizers_hyperparameters_and_printed_config(observed):
    seen = same(observed, "cli")
    overridden = "`Injected.configure_optimizers` will be overridden by `WithAdam.configure_optimizers`."
    assert seen["automatic"] == ["Adam", 0.25, [overridden]]
    # the hyperparameters are the config the model was built from: a nested object as class_path/init_args
    assert seen["hparams"]["activation"]["class_path"] == "torch.nn.LeakyReLU" and seen["hparams"]["out_dim"] == 3
    assert seen["link_to"] == ["torch.optim.SGD", 0.5]
    assert seen["print_config"] == ["# lightning.pytorch", "lightning.pytorch.demos.BoringModel",
                                    "lightning.pytorch.demos.BoringDataModule"]
    assert len(seen["args_and_argv"]) == 1


def test_fast_dev_run_replaces_the_loggers_with_a_dummy(observed):
    assert same(observed, "fast_dev_run_logger") == ["DummyLogger", "", 0]


def test_the_fabric_run_command_is_lightnings(observed):
    usage, *options = same(observed, "fabric_command")
    assert usage.startswith("Usage: fabric run [OPTIONS] SCRIPT [SCRIPT_ARGS]") and options == [True, True]
