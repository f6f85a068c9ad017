"""The zero-edit mode: unmodified Lightning programs run on Relay with ``python -m trainer.lightning_compat``.

The programs in tests/compat/lightning_programs/ import ``lightning.pytorch``, ``lightning`` or
``pytorch_lightning`` and print what they observe; where Lightning is installed the same program also runs on
Lightning and the two observations are compared. Each run is a subprocess with a timeout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.optional import need

PROGRAMS = Path(__file__).parent / "lightning_programs"
pytestmark = pytest.mark.timeout(600)


def run(args: list[str], cwd: Path, compat: bool = True, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RELAY_LIGHTNING_COMPAT")}
    env["PYTHONUNBUFFERED"] = "1"
    prefix = [sys.executable, "-m", "trainer.lightning_compat"] if compat else [sys.executable]
    return subprocess.run([*prefix, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def observed(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_together(*calls: tuple) -> list[subprocess.CompletedProcess]:
    """Several :func:`run` calls (argument tuples) at the same time: a Relay run and its Lightning reference are
    independent processes that mostly import and start up, which the cores can overlap."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: run(*call), calls))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> tuple[dict, subprocess.CompletedProcess | None]:
    """classifier.py under the compatibility mode, and (where Lightning is installed) on Lightning, run at once."""
    root = tmp_path_factory.mktemp("classifier")
    calls = [([str(PROGRAMS / "classifier.py")], root / "relay")]
    if importlib.util.find_spec("lightning") is not None:
        calls.append(([str(PROGRAMS / "classifier.py")], root / "lightning", False))
    for _, cwd, *_ in calls:
        cwd.mkdir()
    done = run_together(*calls)
    return observed(done[0]), done[1] if len(done) > 1 else None


def test_classifier_runs_unmodified_with_lightning_default_paths(classifier):
    relay, _ = classifier
    assert relay["best"].startswith("lightning_logs/version_0/checkpoints/epoch=")
    assert relay["best"] in relay["files"] and "lightning_logs/version_0/hparams.yaml" in relay["files"]
    assert relay["global_step"] == 36 and relay["current_epoch"] == 3  # 384 samples / 32 per batch x 3 epochs
    assert relay["test_keys"] == ["test_acc", "test_loss"] and relay["test_acc"] > 0.5
    assert relay["lr_keys"] == ["lr-Adam"] and relay["restored_hidden"] == 64


def test_classifier_observations_match_lightning(classifier):
    need("lightning", "compared against a real Lightning run")
    relay, lightning_run = classifier
    real = observed(lightning_run)
    for key in ("files", "global_step", "current_epoch", "test_keys", "lr_keys", "restored_hidden"):
        assert relay[key] == real[key], key
    assert set(real["logged_keys"]) <= set(relay["logged_keys"]) | {"epoch"}, (relay["logged_keys"], real["logged_keys"])


def test_gan_with_manual_optimization_runs_unmodified(tmp_path):
    (tmp_path / "relay").mkdir()
    (tmp_path / "real").mkdir()
    calls = [([str(PROGRAMS / "gan.py")], tmp_path / "relay")]
    if importlib.util.find_spec("lightning") is not None:  # the reference runs at the same time
        calls.append(([str(PROGRAMS / "gan.py")], tmp_path / "real", False))
    done = run_together(*calls)
    relay = observed(done[0])
    assert relay["global_step"] == 32  # 8 batches x 2 epochs x 2 optimizer steps per batch
    assert "last.ckpt" in relay["files"] and relay["finite"]
    assert relay["metric_keys"] == ["d_loss", "g_loss"] and relay["optimizers_saved"] == 2
    need("lightning", "compared against a real Lightning run")
    real = observed(done[1])
    for key in ("global_step", "current_epoch", "files", "metric_keys", "checkpoint_has", "optimizers_saved"):
        assert relay[key] == real[key], key


# Lightning 2.6.6's ddp_spawn workers leave gloo's threads running at exit; on torch 2.13 about one run in four
# then aborts in a worker after fit has finished ("terminate called without an active exception", measured 2 of 8).
# That is the reference's failure, not Relay's (Relay's own run is asserted once, above it), so the reference
# alone is retried, and only on that message.
LIGHTNING_TEARDOWN_ABORT = "terminate called without an active exception"


def run_lightning_reference(script: Path, root: Path, tries: int = 3) -> tuple[subprocess.CompletedProcess, Path]:
    """Lightning's run of ``script`` with ddp_spawn and the directory it wrote, retried only on its teardown abort."""
    for attempt in range(tries):
        run_dir = root / f"real{attempt}"
        run_dir.mkdir()
        done = run([str(script), "trainer=ddp_spawn", f"hydra.run.dir={run_dir}"], run_dir, compat=False)
        if done.returncode == 0 or LIGHTNING_TEARDOWN_ABORT not in done.stderr:
            break
    return done, run_dir


def test_hydra_project_with_ddp_spawn_on_two_processes(tmp_path):
    project = PROGRAMS / "hydra_project"
    ours = tmp_path / "relay"  # beside Lightning's real<attempt>/ directories
    ours.mkdir()
    with ThreadPoolExecutor(1) as pool:  # Lightning's reference (where installed) runs while Relay's does
        reference = None
        if importlib.util.find_spec("lightning") is not None:
            reference = pool.submit(run_lightning_reference, project / "train.py", tmp_path)
        done = run([str(project / "train.py"), "trainer=ddp_spawn", f"hydra.run.dir={ours}"], ours)
        reference_done = reference.result() if reference is not None else None
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads((ours / "result.json").read_text())
    assert result["strategy"] == "DDPSpawnStrategy"
    assert result["global_step"] == 20  # 144 training samples / 2 ranks = 72 each: 5 batches of 16, x 4 epochs
    assert result["val_acc"] > 0.5 and Path(result["best_model_path"]).is_file()
    assert Path(result["best_model_path"]).name.startswith("epoch_")
    assert {"train/loss", "val/acc", "val/loss"} <= set(result["metrics"])
    assert list((ours / "csv").glob("version_0/metrics.csv"))
    need("lightning", "compared against a real Lightning run")
    done, real_dir = reference_done
    assert done.returncode == 0, done.stderr[-4000:]
    real = json.loads((real_dir / "result.json").read_text())
    # docs/guides/from-lightning.md: "Lightning 2.6.6's launching process reports `global_step == 0` (out/result.json); under
    # `python -m trainer.lightning_compat` it reports the workers' 20." The measured difference, kept measured:
    assert real["global_step"] == 0 and result["global_step"] == 20
    assert real["metrics"] == result["metrics"]
    assert Path(real["best_model_path"]).name == Path(result["best_model_path"]).name
    names = lambda root: sorted(p.name for p in root.glob("csv/version_0/checkpoints/*.ckpt"))  # noqa: E731
    assert names(real_dir) == names(ours) and "last.ckpt" in names(ours)


def test_names_relay_lacks_fail_with_one_line(tmp_path):
    script = tmp_path / "uses_registry.py"
    script.write_text("import lightning.pytorch.demos.mnist_datamodule as mnist\n"
                      "from lightning.pytorch.demos.mnist_datamodule import MNISTDataModule\n")
    done = run([str(script)], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"{script}:2: lightning.pytorch.demos.mnist_datamodule.MNISTDataModule is not provided by Relay's Lightning compatibility "
        "mode; see docs/lightning_api.md in the Relay repository for the names it lacks and why."
    ]


def test_compat_mode_in_process_and_real_lightning_untouched_otherwise():
    code = (
        "import importlib.util, sys\n"
        "from trainer.lightning_compat import install, uninstall, LightningImportError, LightningAttributeError\n"
        "install(children=False)\n"
        "import lightning.pytorch as pl, pytorch_lightning as ptl, trainer\n"
        "assert pl.LightningModule is trainer.Module and ptl.Trainer is trainer.Trainer\n"
        "from lightning.pytorch.callbacks import ModelCheckpoint\n"
        "from lightning.pytorch.utilities.rank_zero import rank_zero_only\n"
        "from lightning.pytorch.callbacks.progress import TQDMProgressBar\n"  # kept elsewhere in trainer.callbacks
        "from lightning.pytorch.callbacks.progress.tqdm_progress import TQDMProgressBar as T2\n"
        "from lightning.pytorch.core.module import LightningModule\n"
        "assert TQDMProgressBar is T2 and LightningModule is trainer.Module\n"
        "from lightning.pytorch.accelerators import XLAAccelerator\n"
        "assert not XLAAccelerator.is_available()\n"
        "try:\n    from lightning.pytorch.demos.mnist_datamodule import MNISTDataModule\n"
        "except ImportError as e:\n"
        "    assert isinstance(e, LightningImportError) and 'MNISTDataModule is not provided' in str(e)\n"
        "else:\n    raise SystemExit('no error')\n"
        "try:\n    import lightning.pytorch.no_such_module\nexcept ImportError as e:\n"
        "    assert isinstance(e, LightningImportError)\n"
        "else:\n    raise SystemExit('no error')\n"
        "uninstall()\n"
        "print('ok', 'lightning' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["ok", "False"], done.stderr
    plain = subprocess.run([sys.executable, "-c", "import sys, trainer, trainer.lightning_compat; "
                            "print(any('Lightning' in type(f).__name__ for f in sys.meta_path))"],
                           capture_output=True, text=True, timeout=120)
    assert plain.stdout.strip() == "False"


def test_ddp_workers_started_by_the_relaunch_serve_lightning_too(tmp_path):
    """strategy='ddp' re-runs the command in each worker: the workers are in compatibility mode as well."""
    script = tmp_path / "ddp_boring.py"
    script.write_text(
        "import json\n"
        "import lightning.pytorch as pl\n"
        "from lightning.pytorch.demos.boring_classes import BoringModel\n"
        "import trainer\n"
        "if __name__ == '__main__':\n"
        "    t = pl.Trainer(strategy='ddp', devices=2, accelerator='cpu', max_epochs=1, limit_train_batches=4,\n"
        "                   limit_val_batches=2, enable_progress_bar=False, enable_model_summary=False)\n"
        "    t.fit(BoringModel())\n"
        "    with open(f'rank{t.global_rank}.json', 'w') as f:\n"
        "        json.dump({'world': t.world_size, 'relay': pl.Trainer is trainer.Trainer,\n"
        "                   'ckpt': t.checkpoint_callback.best_model_path}, f)\n"
    )
    done = run([str(script)], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    expected = str(tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "epoch=0-step=4.ckpt")
    assert ranks[0] == ranks[1] == {"world": 2, "relay": True, "ckpt": expected}
    assert Path(expected).is_file()
