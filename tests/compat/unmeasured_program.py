"""Behaviours of Lightning's test files that were measured last (legacy TPU names, LitLogger, Fabric's strategy
calls, the optimizer closure, loaders given as plain collections, precision errors, cluster environments), the public
members of Lightning's objects and MLflow's autolog, which reads some of them, observed the same way on Lightning and
on Relay's zero-edit mode.

``python unmeasured_program.py lightning|relay`` runs every check and emits one JSON dict (see
tests/compat/lightning_diff/harness.py); tests/compat/test_conformance_unmeasured.py compares the two.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import sys
import tempfile
import types
import warnings
from argparse import Namespace
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")

from tests.compat.lightning_diff.harness import run_checks, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import torch  # noqa: E402

from lightning.fabric import Fabric  # noqa: E402
from lightning.pytorch import LightningModule, Trainer  # noqa: E402
from lightning.pytorch.demos.boring_classes import BoringModel  # noqa: E402

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
ROOT = tempfile.mkdtemp(prefix="unmeasured-")


def fresh_dir(name: str) -> str:
    path = os.path.join(ROOT, name)
    os.makedirs(path)
    return path


def failure(err: BaseException) -> list[str]:
    return [type(err).__name__, str(err)]


def check_legacy_tpu_names():
    """Each legacy TPU name announces its deprecation, then fails for the missing torch_xla."""
    seen = {}
    for module, name, args in (("lightning.fabric.accelerators", "TPUAccelerator", ()),
                               ("lightning.fabric.strategies", "SingleTPUStrategy", (torch.device("cpu"),)),
                               ("lightning.fabric.plugins.precision", "TPUPrecision", ()),
                               ("lightning.fabric.plugins.precision", "XLABf16Precision", ()),
                               ("lightning.pytorch.plugins.precision", "TPUBf16PrecisionPlugin", ()),
                               ("lightning.pytorch.accelerators", "TPUAccelerator", ())):
        cls = getattr(importlib.import_module(module), name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                cls(*args)
                error = None
            except Exception as err:  # noqa: BLE001 - the error is the observation
                error = [type(err).__name__, "torch_xla" in str(err)]
        seen[f"{module}.{name}"] = [[issubclass(w.category, DeprecationWarning), str(w.message)] for w in caught
                                    if "deprecated" in str(w.message)], error, cls.__name__
    return seen


def _stand_in_litlogger() -> tuple[types.ModuleType, list]:
    """A stand-in ``litlogger`` package (Lightning AI's client is not installed here) that records its calls."""
    calls: list = []

    class Series:
        def __init__(self, key):
            self.key = key

        def append(self, value, step=None):
            calls.append(["append", self.key, type(value).__name__, value, step])

        def save(self, path):
            calls.append(["save", self.key, path])
            return f"saved:{path}"

    class Experiment:
        url = "https://lightning.ai/exp"
        name = "exp-name"

        def __init__(self, **kwargs):
            calls.append(["Experiment", sorted((k, v) for k, v in kwargs.items() if k not in ("name", "log_dir"))])
            self.kwargs = kwargs

        def print_url(self):
            calls.append(["print_url"])

        def __getitem__(self, key):
            return Series(key)

        def __setitem__(self, key, value):
            calls.append(["set", key, value if isinstance(value, str) else type(value).__name__])

        def finalize(self, status):
            calls.append(["finalize", status])

    class File:
        def __init__(self, path):
            self.path = path

    class Model:
        def __init__(self, obj, **kwargs):
            calls.append(["Model", obj if isinstance(obj, str) else type(obj).__name__, sorted(kwargs.items())])

    package = types.ModuleType("litlogger")
    package.Experiment, package.File, package.Model = Experiment, File, Model
    generator = types.ModuleType("litlogger.generator")
    generator._create_name = lambda: "generated-name"
    package.generator = generator
    return package, calls


def check_litlogger():
    package, calls = _stand_in_litlogger()
    from lightning.pytorch.loggers.litlogger import LitLogger

    sys.modules["litlogger"], sys.modules["litlogger.generator"] = package, package.generator
    try:  # (not mock.patch.dict on sys.modules: it would also drop the modules the fit below imports)
        root = fresh_dir("litlogger")
        default = LitLogger(root_dir=root)
        logger = LitLogger(name="run", root_dir=root, teamspace="team", metadata={"k": 1})
        before = logger.version
        dirs = [default.name, os.path.relpath(logger.log_dir, root), logger.save_dir == logger.log_dir]
        logger.log_metrics({"loss": torch.tensor(0.5), "count": torch.tensor(3), "lr": 0.1})
        logger.log_metrics({"loss": 0.25}, step=7)
        logger.log_hyperparams(Namespace(lr=0.1, layers=2))
        logger.log_file("config.yaml")
        got = logger.get_file("config.yaml")
        logger.log_model_artifact("/models/m.ckpt")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logger.log_graph(torch.nn.Linear(1, 1))
        version = logger.version
        experiment_key = [c for c in calls if c[0] == "set" and c[2] == "Model"][0][1] == f"run-{version}"
        logger.finalize("success")
        unstarted = LitLogger(name="idle", root_dir=root)
        unstarted.finalize("success")  # no experiment yet: nothing to finalize

        class Logging(BoringModel):
            def training_step(self, batch, batch_idx):
                out = super().training_step(batch, batch_idx)
                self.log("train_loss", out["loss"])
                return out

        recorded = list(calls)
        fit_logger = LitLogger(name="fit", root_dir=root)
        start = len(calls)
        Trainer(default_root_dir=root, max_steps=1, logger=fit_logger, log_every_n_steps=1, enable_progress_bar=False,
                enable_model_summary=False, enable_checkpointing=False).fit(Logging())
        fit_calls = sorted({c[1] for c in calls[start:] if c[0] == "append"})
    finally:
        del sys.modules["litlogger"], sys.modules["litlogger.generator"]
    for call in recorded:  # the experiment's key holds the start time: its shape only
        if call[0] == "set" and call[1].startswith("run-"):
            call[1] = "run-<version>"
    return {"before": before, "dirs": dirs, "version_has_colon": ":" in version, "calls": recorded, "got": got,
            "experiment_key": experiment_key, "graph_warning": [str(w.message) for w in caught],
            "fit_series": fit_calls}


def check_fabric_strategy_checkpoints():
    from lightning.fabric.plugins import DoublePrecision, HalfPrecision
    from lightning.fabric.strategies import SingleDeviceStrategy

    root = fresh_dir("strategy")
    strategy = SingleDeviceStrategy()
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)

    class Counter:
        def __init__(self, count):
            self.count = count

        def state_dict(self):
            return {"count": self.count}

        def load_state_dict(self, state):
            self.count = state["count"]

    path = os.path.join(root, "state.ckpt")
    strategy.save_checkpoint(path, {"model": model, "optimizer": optimizer, "counter": Counter(5), "n": 1})
    saved = torch.load(path, weights_only=True)
    shapes = {k: sorted(v) if isinstance(v, dict) else v for k, v in saved.items()}
    new_model, counter = torch.nn.Linear(2, 2), Counter(0)
    new_optimizer = torch.optim.Adam(new_model.parameters(), lr=0.3)
    state = {"model": new_model, "optimizer": new_optimizer, "counter": counter, "n": 0}
    remainder = strategy.load_checkpoint(path, state)
    restored = [torch.equal(new_model.weight, model.weight), new_optimizer.param_groups[0]["lr"], counter.count,
                state["n"], remainder]
    partial = strategy.load_checkpoint(path, {"model": torch.nn.Linear(2, 2)})
    whole = sorted(strategy.load_checkpoint(path))
    try:
        strategy.load_checkpoint(path, {"model": torch.nn.Linear(2, 2), "missing": 1})
        strict = None
    except Exception as err:  # noqa: BLE001
        strict = failure(err)
    loose = strategy.load_checkpoint(path, {"missing": 1}, strict=False)
    raw = os.path.join(root, "raw.ckpt")
    torch.save(model.state_dict(), raw)
    raw_model = torch.nn.Linear(2, 2)
    raw_back = [strategy.load_checkpoint(raw, state=raw_model), torch.equal(raw_model.weight, model.weight)]
    dtypes = {}
    for name, precision in (("16-true", HalfPrecision("16-true")), ("64-true", DoublePrecision())):
        for empty_init in (None, True):
            with SingleDeviceStrategy(device=torch.device("cpu"), precision=precision).module_init_context(
                    empty_init=empty_init):
                layer = torch.nn.Linear(2, 2)
            dtypes[f"{name}/{empty_init}"] = str(layer.weight.dtype)
    return {"saved": shapes, "restored": restored, "partial": sorted(partial), "whole": whole, "strict": strict,
            "loose": sorted(loose), "raw": raw_back, "dtypes": dtypes}


def check_rank_zero_only_reads_the_launchers_rank():
    """A fresh import of the rank_zero module in a process whose environment names its rank."""
    seen = {}
    for env in ({"RANK": "1"}, {"LOCAL_RANK": "0"}, {"SLURM_PROCID": "2"}):
        saved = {name: sys.modules.get(name) for name in ("lightning_utilities.core.rank_zero",
                                                           "lightning.fabric.utilities.rank_zero")}
        try:
            with mock.patch.dict(os.environ, env):
                for name in saved:
                    sys.modules.pop(name, None)
                from lightning.fabric.utilities.rank_zero import rank_zero_only

                seen[str(env)] = rank_zero_only(lambda: 1)()
        finally:
            for name, module in saved.items():
                if module is not None:
                    sys.modules[name] = module
    return seen


def check_the_closure():
    class NoGradAdamW(torch.optim.AdamW):
        @torch.no_grad()
        def step(self, closure):
            if closure is not None:
                closure()
            return super().step()

    class GradChecked(BoringModel):
        grad_modes: list = []

        def training_step(self, batch, batch_idx):
            self.grad_modes.append(torch.is_grad_enabled())
            return super().training_step(batch, batch_idx)

        def configure_optimizers(self):
            return NoGradAdamW(self.parameters(), lr=0.1)

    model = GradChecked()
    Trainer(default_root_dir=fresh_dir("closure"), max_steps=2, limit_val_batches=0, **QUIET).fit(model)

    class SkipsTheClosure(BoringModel):
        def optimizer_step(self, epoch=None, batch_idx=None, optimizer=None, optimizer_closure=None, **_):
            pass

    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    try:
        Trainer(default_root_dir=fresh_dir("no-closure"), max_steps=1, limit_val_batches=0, **QUIET).fit(
            SkipsTheClosure())
        error = None
    except Exception as err:  # noqa: BLE001
        error = [str(err), isinstance(err, MisconfigurationException)]  # Relay's is a subclass of it
    return {"grad_modes": model.grad_modes, "error": error}


def check_loaders_given_as_plain_collections():
    class IterSteps(BoringModel):
        def __init__(self):
            super().__init__()
            self.starts, self.taken = [], []

        def on_train_batch_start(self, batch, batch_idx, dataloader_idx=0):
            self.starts.append([batch, batch_idx])

        def training_step(self, dataloader_iter):
            self.taken.append(next(dataloader_iter))

    model = IterSteps()
    Trainer(default_root_dir=fresh_dir("dict"), limit_train_batches=3, limit_val_batches=0, max_epochs=1,
            **QUIET).fit(model, {"a": [0, 1], "b": [2, 3]})

    class Plain(LightningModule):
        def __init__(self):
            super().__init__()
            self.seen, self.dtype_in_configure = [], None

        def configure_model(self):
            self.layer = torch.nn.Linear(1, 3)
            self.dtype_in_configure = str(self.layer.weight.dtype)

        def test_step(self, batch, batch_idx):
            self.seen.append([batch, batch_idx])

    class Unsized(torch.utils.data.IterableDataset):  # a loader without a length is not a collection of batches
        def __iter__(self):
            return iter(torch.randn(3, 32))

    unsized = Trainer(default_root_dir=fresh_dir("unsized"), max_epochs=1, limit_val_batches=0, **QUIET)
    unsized.fit(BoringModel(), torch.utils.data.DataLoader(Unsized(), batch_size=None))

    plain = Plain()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        Trainer(default_root_dir=fresh_dir("plain"), precision="bf16-true", **QUIET).test(plain, [0, 5])
    return {"dict": [model.starts, model.taken], "plain": [plain.seen, plain.dtype_in_configure,
                                                           str(plain.layer.weight.dtype)],
            "printed": printed.getvalue(), "unsized_steps": unsized.global_step}


def check_precision_errors_and_calls():
    from lightning.fabric.plugins.precision import DeepSpeedPrecision as FabricDeepSpeedPrecision
    from lightning.fabric.utilities.types import Steppable
    from lightning.pytorch.plugins import MixedPrecision
    from lightning.pytorch.plugins.precision import DeepSpeedPrecision

    seen = {}
    for name, build in (("mixed", lambda: MixedPrecision("16", "cpu")),
                        ("deepspeed", lambda: DeepSpeedPrecision("64-true")),
                        ("fabric_deepspeed", lambda: FabricDeepSpeedPrecision("64-true"))):
        try:
            build()
            seen[name] = None
        except Exception as err:  # noqa: BLE001
            seen[name] = [type(err).__name__, str(err).lstrip("`")]  # Lightning's MixedPrecision's opens with a stray `

    class Engine:  # what DeepSpeed's engine offers Lightning's precision: backward and step
        def __init__(self):
            self.calls = []

        def backward(self, tensor, *args, **kwargs):
            self.calls.append(["backward", float(tensor), list(args), kwargs])

        def step(self, closure=None):
            self.calls.append(["step"])

    engine = Engine()
    FabricDeepSpeedPrecision("32-true").backward(torch.tensor(2.0), engine, "positional", keyword="arg")
    seen["engine_calls"] = engine.calls
    seen["steppable"] = [isinstance(engine, Steppable), isinstance(object(), Steppable),
                         isinstance(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1), Steppable)]
    return seen


def check_a_strategys_own_optimizer_restore():
    from lightning.pytorch.strategies import SingleDeviceStrategy

    root = fresh_dir("custom-strategy")
    trainer = Trainer(default_root_dir=root, max_steps=1, limit_val_batches=0, **QUIET)
    trainer.fit(BoringModel())
    path = os.path.join(root, "model.ckpt")
    trainer.save_checkpoint(path)
    seen = {}
    for restore in (True, False):
        class OwnRestore(SingleDeviceStrategy):
            given = None
            restores = restore

            @property
            def lightning_restore_optimizer(self) -> bool:
                return self.restores

            def load_optimizer_state_dict(self, checkpoint):
                self.given = sorted(checkpoint)[:3]

        strategy = OwnRestore(torch.device("cpu"))
        Trainer(default_root_dir=root, max_steps=2, limit_val_batches=0, strategy=strategy, accelerator="cpu",
                **QUIET).fit(BoringModel(), ckpt_path=path)
        seen[str(restore)] = strategy.given
    return seen


def check_fabric_mixed_precision_dtypes():
    class Recording(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 2)
            self.inputs = []

        def forward(self, x, scale):
            self.inputs.append([str(x.dtype), str(scale.dtype), torch.is_autocast_cpu_enabled()])
            return {"out": self.layer(x), "ids": torch.arange(2)}

    fabric = Fabric(accelerator="cpu", devices=1, precision="bf16-mixed")
    module = Recording()
    model = fabric.setup(module)
    out = model(torch.rand(2, 4), torch.ones(1, dtype=torch.float64))
    return {"inputs": module.inputs, "outputs": [str(out["out"].dtype), str(out["ids"].dtype)],
            "weights": str(module.layer.weight.dtype)}


def check_cluster_environments():
    from lightning.fabric.plugins.environments import KubeflowEnvironment, SLURMEnvironment, TorchElasticEnvironment

    seen = {}
    with mock.patch.dict(os.environ, {}, clear=True):
        env = KubeflowEnvironment()
        for what, read in (("main_address", lambda: env.main_address), ("world_size", env.world_size),
                           ("global_rank", env.global_rank)):
            try:
                read()
                seen[what] = None
            except Exception as err:  # noqa: BLE001
                seen[what] = [isinstance(err, KeyError), type(err).__name__ in ("KeyError", "MissingVariableError")]
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    package = logging.getLogger("lightning.fabric.plugins.environments")
    handler, level = Keep(), package.level
    package.addHandler(handler)
    package.setLevel(logging.DEBUG)
    try:
        with mock.patch.dict(os.environ, {"TORCHELASTIC_RUN_ID": "1", "MASTER_ADDR": "1.2.3.4", "MASTER_PORT": "500",
                                          "WORLD_SIZE": "8", "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0",
                                          "LOCAL_WORLD_SIZE": "4"}):
            elastic = TorchElasticEnvironment()
            elastic.set_global_rank(100)
            elastic.set_world_size(100)
            seen["elastic"] = [elastic.global_rank(), elastic.world_size(), elastic.node_rank()]
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
    seen["setter_logs"] = records
    with mock.patch.dict(os.environ, {"WORLD_SIZE": "8"}):
        elastic = TorchElasticEnvironment()
        elastic.validate_settings(num_devices=4, num_nodes=2)
        try:
            elastic.validate_settings(num_devices=2, num_nodes=2)
            seen["product"] = None
        except Exception as err:  # noqa: BLE001
            seen["product"] = failure(err)
    hosts = {}
    for nodes in ("alpha beta gamma", "alpha, host[5-9], gamma", "1.2.3.[089, 100-110]", "host[22]"):
        with mock.patch.dict(os.environ, {"SLURM_NODELIST": nodes}):
            hosts[nodes] = SLURMEnvironment().main_address
    seen["slurm_hosts"] = hosts
    return seen


def check_the_fits_validation_runs_through_val_loop_run():
    class Counting(BoringModel):
        validated = 0

        def validation_step(self, batch, batch_idx):
            self.validated += 1
            return super().validation_step(batch, batch_idx)

    seen = {}
    for replace in (False, True):
        model = Counting()
        trainer = Trainer(default_root_dir=fresh_dir(f"val-loop-{replace}"), max_epochs=2, limit_train_batches=2,
                          limit_val_batches=1, num_sanity_val_steps=1, **QUIET)
        val_loop = trainer.fit_loop.epoch_loop.val_loop
        calls, original = [], val_loop.run

        def run(original=original, calls=calls, replace=replace, trainer=trainer):
            calls.append(trainer.sanity_checking)
            return None if replace else original()

        val_loop.run = run
        trainer.fit(model)
        seen[str(replace)] = [calls, model.validated]
    return seen


def check_possible_user_warnings_off_at_a_reload():
    """Last: it silences PossibleUserWarning for the rest of the process, as on Lightning."""
    import lightning.pytorch
    from lightning.pytorch.utilities.warnings import PossibleUserWarning

    def silenced() -> bool:
        return any(action == "ignore" and category is PossibleUserWarning
                   for action, _, category, _, _ in warnings.filters)

    before = silenced()
    os.environ["POSSIBLE_USER_WARNINGS"] = "off"
    try:
        importlib.reload(lightning.pytorch)
    finally:
        os.environ.pop("POSSIBLE_USER_WARNINGS")
    return [before, silenced()]


class Normalizer:
    """A project's own object, among its hyperparameters and in ``on_save_checkpoint`` (as pytorch-forecasting keeps
    its encoders and losses)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale


class WithObjects(BoringModel):
    def __init__(self, target: Normalizer | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()  # Lightning pickles the object as it is

    def on_save_checkpoint(self, checkpoint):
        checkpoint["normalizer"] = Normalizer(2.5)

    def on_load_checkpoint(self, checkpoint):
        self.loaded_scale = checkpoint["normalizer"].scale


def check_checkpoints_with_the_projects_objects():
    """Data only by default; ``weights_only=False`` (torch's and Lightning's opt-in) reads the objects back, in
    ``load_from_checkpoint`` (hyperparameters included) and in ``fit(ckpt_path=...)``."""
    trainer = Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=0, logger=False,
                      enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(WithObjects(Normalizer(4.0)))
    path = trainer.checkpoint_callback.best_model_path
    out = {}
    try:
        WithObjects.load_from_checkpoint(path)
        out["default"] = "loaded"
    except Exception as err:  # noqa: BLE001
        out["default"] = "raised, names weights_only" if "weights_only" in str(err) else f"raised: {err}"
    trusted = WithObjects.load_from_checkpoint(path, weights_only=False)
    out["trusted"] = [trusted.loaded_scale, type(trusted.hparams.target).__name__, trusted.hparams.target.scale]
    resumed = WithObjects(Normalizer(4.0))
    Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=0, logger=False, enable_progress_bar=False,
            enable_model_summary=False, enable_checkpointing=False).fit(resumed, ckpt_path=path, weights_only=False)
    out["resumed"] = [resumed.loaded_scale, resumed.current_epoch]
    return out


def check_tuning_a_module_with_hyperparameter_objects():
    """The learning-rate finder restores the snapshot it wrote before the search: Lightning reads it data-only and
    fails on a kept object (unless ``weights_only=False`` is patched in); Relay reads its own snapshot in full."""
    from lightning.pytorch.tuner import Tuner

    class Tuned(WithObjects):
        def __init__(self, target: Normalizer | None = None, lr: float = 0.1) -> None:
            super().__init__(target)
            self.lr = lr

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    trainer = Trainer(max_epochs=1, logger=False, enable_progress_bar=False, enable_model_summary=False)
    model = Tuned(Normalizer(4.0))
    try:
        Tuner(trainer).lr_find(model, num_training=5)
    except Exception as err:  # noqa: BLE001
        return {"raised": type(err).__name__}
    return {"tuned": type(model.hparams.target).__name__}


# module -> {class: constructor arguments (None: the class itself, for classes that need what is not here)}
CLASSES = {
    "lightning.pytorch.strategies": {
        "SingleDeviceStrategy": {"device": torch.device("cpu")}, "DDPStrategy": {}, "FSDPStrategy": {},
        "ModelParallelStrategy": {}},
    "lightning.pytorch.accelerators": {"CPUAccelerator": {}, "CUDAAccelerator": None},
    "lightning.pytorch.plugins": {"Precision": {}, "MixedPrecision": {"precision": "bf16-mixed", "device": "cpu"},
                                  "DoublePrecision": {}, "HalfPrecision": {}},
    "lightning.pytorch.plugins.io": {"TorchCheckpointIO": {}, "AsyncCheckpointIO": {}},
    "lightning.pytorch.plugins.environments": {"LightningEnvironment": {}, "SLURMEnvironment": {},
                                               "TorchElasticEnvironment": {}, "KubeflowEnvironment": {}},
    "lightning.pytorch.loggers": {"TensorBoardLogger": {"save_dir": "tb"}, "CSVLogger": {"save_dir": "csv"}},
    "lightning.pytorch.profilers": {"SimpleProfiler": {}, "PyTorchProfiler": {}, "AdvancedProfiler": {},
                                    "PassThroughProfiler": {}},
    "lightning.pytorch.callbacks": {
        "ModelCheckpoint": {}, "EarlyStopping": {"monitor": "x"}, "LearningRateMonitor": {}, "TQDMProgressBar": {},
        "RichProgressBar": {}, "ModelSummary": {}, "BatchSizeFinder": {}, "LearningRateFinder": {},
        "StochasticWeightAveraging": {"swa_lrs": 0.1}, "Timer": {}, "DeviceStatsMonitor": {},
        "BackboneFinetuning": {}, "GradientAccumulationScheduler": {"scheduling": {0: 1}},
        "ModelPruning": {"pruning_fn": "l1_unstructured"}, "OnExceptionCheckpoint": {"dirpath": "."},
        "RichModelSummary": {}, "SpikeDetection": {}, "EMAWeightAveraging": {},
        "ThroughputMonitor": {"batch_size_fn": len}, "LambdaCallback": {}},
    "lightning.pytorch": {"Trainer": {"accelerator": "cpu", "logger": False, "enable_progress_bar": False},
                          "LightningModule": {}, "LightningDataModule": {}},
    "lightning.fabric": {"Fabric": {"accelerator": "cpu"}},
}


def check_public_members() -> dict:
    seen = {}
    for module, classes in CLASSES.items():
        for name, kwargs in classes.items():
            cls = getattr(importlib.import_module(module), name)
            obj = cls if kwargs is None else cls(**kwargs)
            seen[f"{module}.{name}"] = sorted(n for n in dir(obj) if not n.startswith("_"))
    return seen


def check_mlflow_autolog() -> dict:
    """What ``mlflow.pytorch.autolog`` records of a fit (it reads ``trainer.strategy.lightning_module`` and builds
    its checkpoints with ``trainer._checkpoint_connector.dump_checkpoint``)."""
    import mlflow
    import mlflow.pytorch
    from torch.utils.data import DataLoader, TensorDataset

    class Net(LightningModule):
        def __init__(self, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.layer(x)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self(batch[0]), batch[1])
            self.log("train_loss", loss, on_epoch=True)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", torch.nn.functional.mse_loss(self(batch[0]), batch[1]))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    mlflow.set_tracking_uri(f"sqlite:///{ROOT}/mlflow.db")
    mlflow.pytorch.autolog(checkpoint=True, log_models=True, silent=True)
    trainer = Trainer(max_epochs=2, logger=False, enable_progress_bar=False, enable_model_summary=False)
    # the saved model's pip requirements are inferred in a subprocess that imports it (7 s): not what is compared
    try:
        with mock.patch("mlflow.models.infer_pip_requirements", side_effect=lambda *args, fallback, **kw: fallback):
            trainer.fit(Net(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=8))
    finally:  # autolog patches every later fit of this process
        mlflow.pytorch.autolog(disable=True)
    run_id = mlflow.last_active_run().info.run_id
    client = mlflow.tracking.MlflowClient()

    def files(path: str = "") -> list[str]:
        out = []
        for item in client.list_artifacts(run_id, path):
            out += files(item.path) if item.is_dir else [item.path]
        return out

    checkpoint = torch.load(client.download_artifacts(run_id, "checkpoints/latest_checkpoint.pth", ROOT),
                            weights_only=False)
    return {"params": sorted(client.get_run(run_id).data.params),
            "metrics": {k: [(m.step, round(m.value, 4)) for m in client.get_metric_history(run_id, k)]
                        for k in ("train_loss_epoch", "val_loss")},
            "artifacts": [f for f in files() if not f.startswith("model/")],
            "checkpoint": [checkpoint["epoch"], checkpoint["global_step"], sorted(checkpoint["state_dict"])]}


def check_optuna_pruning() -> list:
    """Optuna's ``PyTorchLightningPruningCallback`` (it reads ``trainer._accelerator_connector.is_distributed`` when
    a fit starts): the same trials, reported values and pruning decisions."""
    import optuna
    from optuna_integration import PyTorchLightningPruningCallback
    from torch.utils.data import DataLoader, TensorDataset

    class Net(LightningModule):
        def __init__(self, lr: float) -> None:
            super().__init__()
            self.lr = lr
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))

    def objective(trial):
        torch.manual_seed(trial.number)
        trainer = Trainer(max_epochs=3, callbacks=[PyTorchLightningPruningCallback(trial, monitor="val_loss")], **QUIET)
        trainer.fit(Net(trial.suggest_float("lr", 1e-3, 10, log=True)), DataLoader(data, batch_size=8),
                    DataLoader(data, batch_size=8))
        return trainer.callback_metrics["val_loss"].item()

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0),
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0))
    study.optimize(objective, n_trials=3)
    return [[t.state.name, [round(v, 4) for v in t.intermediate_values.values()]] for t in study.trials]


def check_device_stats_monitor() -> list:
    """Lightning's ``DeviceStatsMonitor``: ``DeviceStatsMonitor.<hook>/<figure>`` at the logging steps of training,
    the sanity check, validation and test (the rows of its CSV log: step and the hooks logged)."""
    import csv

    from lightning.pytorch.callbacks import DeviceStatsMonitor
    from lightning.pytorch.loggers import CSVLogger

    root = fresh_dir("device_stats")
    trainer = Trainer(default_root_dir=root, max_epochs=1, limit_train_batches=4, limit_val_batches=2,
                      limit_test_batches=2, log_every_n_steps=2, callbacks=[DeviceStatsMonitor()],
                      logger=CSVLogger(root), enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)
    model = BoringModel()
    trainer.fit(model)
    trainer.test(model, verbose=False)
    with open(os.path.join(root, "lightning_logs", "version_0", "metrics.csv")) as file:
        rows = list(csv.DictReader(file))
    return [[row["step"], sorted({key for key, value in row.items() if value and key != "step"})] for row in rows]


def check_throughput_monitor() -> list:
    """Lightning's ``ThroughputMonitor``: the keys it logs and the steps, in training (validation inside), test and
    predict, window 2, with ``length_fn`` and a module's ``flops_per_batch`` (the values are times: not compared)."""
    from unittest.mock import Mock

    from lightning.pytorch.callbacks import ThroughputMonitor

    logger = Mock()
    logger.save_dir = fresh_dir("throughput")
    model = BoringModel()
    model.flops_per_batch = 10
    monitor = ThroughputMonitor(batch_size_fn=lambda batch: 2, length_fn=lambda batch: 6, window_size=2)
    trainer = Trainer(max_steps=4, val_check_interval=2, limit_val_batches=2, limit_test_batches=3,
                      limit_predict_batches=3, log_every_n_steps=2, callbacks=[monitor], logger=logger,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model)
    trainer.test(model, verbose=False)
    trainer.predict(model)
    calls = [call for call in logger.log_metrics.mock_calls if any("|" in k or "/" in k for k in call.kwargs["metrics"])]
    return [[call.kwargs["step"], sorted(call.kwargs["metrics"])] for call in calls]


CHECKS = [check_throughput_monitor, check_public_members, check_mlflow_autolog, check_optuna_pruning, check_device_stats_monitor, check_checkpoints_with_the_projects_objects, check_tuning_a_module_with_hyperparameter_objects, check_legacy_tpu_names, check_litlogger, check_fabric_strategy_checkpoints,
          check_rank_zero_only_reads_the_launchers_rank, check_the_closure, check_loaders_given_as_plain_collections,
          check_precision_errors_and_calls, check_a_strategys_own_optimizer_restore,
          check_fabric_mixed_precision_dtypes, check_cluster_environments,
          check_the_fits_validation_runs_through_val_loop_run, check_possible_user_warnings_off_at_a_reload]


def main() -> None:
    run_checks(CHECKS, ROOT)


if __name__ == "__main__":
    main()
