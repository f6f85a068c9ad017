"""Lightning's utilities as Relay serves them (trainer/lightning_compat/impl/utils_*.py), compared with Lightning
2.6.6 on the same calls (utils_names_program.py runs them on the installed Lightning in a process of its own), and
Relay resuming from checkpoints a real Lightning Trainer wrote, as Lightning resumes from them."""

from __future__ import annotations

import io
import json
import pickle
import sys
import warnings

import pytest

from tests.compat import utils_names_program as program
from tests.compat.lightning_diff import harness
from tests.optional import need_mark

pytestmark = [need_mark("lightning", "differential tests against Lightning"), pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def lightning(tmp_path_factory):
    """Lightning's results: its process is started first, and the Relay side runs while it imports Lightning."""
    where = tmp_path_factory.mktemp("lightning")
    proc = harness._start("lightning", program.__file__, (str(where),), None, str(where))
    try:
        yield proc, where
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _lightning_results(lightning) -> dict:
    proc, _ = lightning
    if not hasattr(proc, "parsed"):
        proc.parsed = harness._finish(proc, timeout=180)
    return proc.parsed


@pytest.fixture(scope="module")
def relay_calls(tmp_path_factory):
    where = tmp_path_factory.mktemp("relay")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return json.loads(json.dumps(program.results("relay", str(where))))


@pytest.mark.parametrize("part", ["migration", "hparams", "data", "helpers", "upgrade", "extras", "profilers", "rich", "logging"])
def test_helpers_give_lightnings_results(lightning, relay_calls, part):
    expected = _lightning_results(lightning)["calls"][part]
    assert relay_calls[part] == expected


def test_relay_resumes_from_checkpoints_a_lightning_trainer_wrote_as_lightning_does(lightning):
    from trainer import Trainer
    from trainer.demos.boring_classes import BoringModel

    expected = _lightning_results(lightning)["resume"]
    _, where = lightning
    quiet = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                 limit_train_batches=4, default_root_dir=str(where / "relay"))
    got = {name: program.resume(Trainer, BoringModel, str(where / f"{name}.ckpt"), quiet) for name in program.RESUMED}
    # [epoch, step] at the start, weights restored, first batch index, [epoch, step] at the end
    assert got == expected
    assert expected["step=2"][2] == 2 and expected["old"][0] == [0, 4]  # mid-epoch and 0.9-era cases are exercised


def test_legacy_patch_unpickles_pytorch_lightning_classes_and_undoes_itself():
    from trainer.callbacks.model_checkpoint import ModelCheckpoint
    from trainer.lightning_compat.impl.utils_migration import _RedirectingUnpickler, pl_legacy_patch
    from trainer.utilities import enums

    # what pytorch_lightning < 1.5 pickled into checkpoints: a callback class by reference
    data = b"\x80\x02cpytorch_lightning.callbacks.model_checkpoint\nModelCheckpoint\nq\x00."
    with pl_legacy_patch():
        assert pickle.Unpickler is _RedirectingUnpickler
        with pytest.warns(UserWarning, match="Redirecting import of pytorch_lightning.callbacks.model_checkpoint"):
            assert pickle.Unpickler(io.BytesIO(data)).load() is ModelCheckpoint
        assert enums._FaultTolerantMode.AUTOMATIC.value == "automatic"
        assert sys.modules["lightning.pytorch.utilities.argparse_utils"]._gpus_arg_default(3) == 3
    assert pickle.Unpickler is not _RedirectingUnpickler
    assert "lightning.pytorch.utilities.argparse_utils" not in sys.modules and not hasattr(enums, "_FaultTolerantMode")


def test_lightning_internals_without_a_relay_counterpart_import_and_raise_naming_relays_way():
    from trainer.lightning_compat.impl import utils_refused

    for call, instead in ((lambda: utils_refused.convert_zero_checkpoint_to_fp32_state_dict("d", "f"), "convert-checkpoint"),
                          (lambda: utils_refused.ds_checkpoint_dir("d"), "convert-checkpoint"),
                          (lambda: utils_refused.DeepSpeedSummary(None), "ModelSummary"),
                          (lambda: utils_refused.DeepSpeedLayerSummary(None), "ModelSummary"),
                          (lambda: utils_refused.ScheduleWrapper(None), "PyTorchProfiler(schedule="),
                          (lambda: utils_refused._InstantiatorFn(None, "model"), "LightningCLI"),
                          (utils_refused._tpu_patch_sys_modules, "aliases serve")):
        with pytest.raises(NotImplementedError, match="does not run on Relay") as err:
            call()
        assert instead in str(err.value)
    for refused in (utils_refused.convert_zero_checkpoint_to_fp32_state_dict, utils_refused.ScheduleWrapper,
                    utils_refused.DeepSpeedSummary, utils_refused._InstantiatorFn):
        assert refused.__relay_refused__  # listed by the surface check under an allowed "refused" exception
    assert utils_refused._remove_prefix("_forward_module.w", "_forward_module.") == "w"
