"""Lightning's LightningModule / LightningDataModule members on Relay's Module and DataModule, in real fits.

``all_gather`` runs on 2 real gloo processes (and, where Lightning is installed, the same script on Lightning
must observe the same gathers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from tests.helpers import Regression, loader, quiet, regression_data
from tests.optional import need
from trainer import DataModule, Module, Trainer
from trainer.callbacks import Callback
from trainer.errors import MisconfigurationException
from trainer.utilities.model_helpers import is_overridden

GATHER_SCRIPT = Path(__file__).with_name("all_gather_script.py")


def fit(model: Module, *args, ckpt_path=None, **kwargs) -> Trainer:
    trainer = Trainer(**quiet(max_epochs=kwargs.pop("max_epochs", 1), **kwargs))
    trainer.fit(model, *args, ckpt_path=ckpt_path)
    return trainer


# --- all_gather -------------------------------------------------------------------------------------------
def _gather_run(out: Path, devices: int, framework: str = "relay") -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run([sys.executable, str(GATHER_SCRIPT), str(out), "--devices", str(devices),
                           "--framework", framework], capture_output=True, text=True, timeout=200, env=env, cwd=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(devices)]
    for info in ranks:
        info.pop("pid")
    return ranks


@pytest.fixture(scope="module")
def two_rank_gathers(tmp_path_factory) -> list[dict]:
    return _gather_run(tmp_path_factory.mktemp("gather2"), 2)


@pytest.mark.timeout(240)
def test_all_gather_on_two_processes_stacks_every_rank(two_rank_gathers):
    for rank, info in enumerate(two_rank_gathers):
        assert info["world_size"] == 2
        tensor = info["tensor"]
        assert tensor["shape"] == [2, 2, 3] and tensor["values"] == [[[0.0] * 3] * 2, [[1.0] * 3] * 2]
        numbers = info["numbers"]  # numbers become tensors with Lightning's dtypes, then gather
        assert numbers["int"] == {"shape": [2], "dtype": "torch.int32", "values": [0, 1], "requires_grad": False}
        assert numbers["float"]["values"] == [0.5, 1.5] and numbers["float"]["dtype"] == "torch.float32"
        assert numbers["bool"]["values"] == [0, 1] and numbers["bool"]["dtype"] == "torch.uint8"
        first, (second,) = info["nested"]
        assert first["values"] == [[0], [1]] and second["shape"] == [2] and second["values"] == [0.0, 2.0]
        assert info["group"]["values"] == [[0.0], [1.0]]
        assert info["batches"] == [[2, 2, 2], [2, 2, 2]]  # (world, batch, features) in training_step
        assert info["no_sync_grads_requires_grad"] is False
        # loss = g[0] + 10 g[1] on both ranks, g[r] = (r + 1) x_r: d/dx_0 = 2 * 1, d/dx_1 = 2 * 10 * 2
        assert info["sync_grads"] == {"requires_grad": True, "grad": [[2.0], [40.0]][rank]}


@pytest.mark.timeout(240)
def test_all_gather_on_one_process_returns_the_data_as_it_is(tmp_path):
    (info,) = _gather_run(tmp_path, 1)
    assert info["tensor"]["shape"] == [2, 3]
    assert info["numbers"]["int"] == {"shape": [], "dtype": "torch.int32", "values": 0, "requires_grad": False}
    assert info["batches"] == [[2, 2]] * 4
    assert info["sync_grads"]["grad"] == [11.0]


@pytest.mark.timeout(480)
def test_all_gather_matches_lightning_on_two_processes(two_rank_gathers, tmp_path):
    need("lightning", "differential all_gather check")
    assert _gather_run(tmp_path, 2, "lightning") == two_rank_gathers


def test_all_gather_needs_a_trainer():
    with pytest.raises(RuntimeError, match="not attached to a Trainer"):
        Regression().all_gather(torch.ones(2))


# --- dtype, on_gpu, fabric -----------------------------------------------------------------------------------
def test_dtype_follows_conversions_and_the_precision_plugin():
    model = Regression()
    assert model.dtype == torch.float32 and model.on_gpu is False
    assert model.double().dtype == torch.float64
    assert model.half().dtype == torch.float16
    assert model.to(torch.float64).dtype == torch.float64
    assert model.to(dtype=torch.float32).dtype == torch.float32
    with pytest.raises(RuntimeError, match=r"\.to\("):
        model.dtype = torch.float64

    class Seen(Regression):
        def training_step(self, batch, batch_idx):
            self.seen = (self.dtype, self.on_gpu)
            return super().training_step(batch, batch_idx)

    model = Seen()
    fit(model, loader(), precision="64-true", max_steps=1)
    assert model.seen == (torch.float64, False)


@pytest.mark.cuda
def test_on_gpu_on_a_cuda_device():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    class Seen(Regression):
        def training_step(self, batch, batch_idx):
            self.seen = (self.on_gpu, self.device.type)
            return super().training_step(batch, batch_idx)

    model = Seen()
    fit(model, loader(), accelerator="gpu", devices=1, max_steps=1)
    assert model.seen == (True, "cuda")


def test_fabric_is_the_one_that_set_the_module_up():
    from trainer.fabric import Fabric

    model = Regression()
    assert model.fabric is None
    fabric = Fabric(accelerator="cpu", devices=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapped, wrapped_optimizer = fabric.setup(model, optimizer)
    assert model.fabric is fabric and model.optimizers() is wrapped_optimizer and model.loggers == []
    assert model.trainer.world_size == 1  # `self.trainer` reads the Fabric object
    model.log("x", 1.0)  # no logger: nowhere to go, no error
    model.fabric = None
    assert model.fabric is None


# --- strict_loading -----------------------------------------------------------------------------------------
class WithFrozenBackbone(Module):
    """Saves only its head (the backbone is frozen and rebuilt), as a parameter-efficient fine-tune does."""

    def __init__(self, strict: bool | None = None) -> None:
        super().__init__()
        self.backbone = torch.nn.Linear(4, 4).requires_grad_(False)
        self.head = torch.nn.Linear(4, 1)
        if strict is not None:
            self.strict_loading = strict

    def state_dict(self, *args, **kwargs):
        return {k: v for k, v in super().state_dict(*args, **kwargs).items() if not k.startswith("backbone.")}

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.head(self.backbone(x)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.head.parameters(), lr=0.1)


def test_strict_loading_false_lets_a_fit_resume_from_a_partial_state_dict(tmp_path):
    trainer = fit(WithFrozenBackbone(), loader())
    path = tmp_path / "head.ckpt"
    trainer.save_checkpoint(path)
    assert not any(k.startswith("backbone.") for k in torch.load(path, weights_only=True)["state_dict"])
    with pytest.raises(RuntimeError, match="Missing key"):  # strict by default, as in Lightning
        fit(WithFrozenBackbone(), loader(), ckpt_path=path, max_epochs=2)
    resumed = WithFrozenBackbone(strict=False)
    assert resumed.strict_loading is False
    fit(resumed, loader(), ckpt_path=path, max_epochs=2)
    assert resumed.trainer.global_step == 16


@pytest.mark.timeout(240)
def test_ddp_spawn_brings_back_a_partial_state_dict_under_strict_loading_false():
    """The launching process takes the workers' weights with ``strict=strict_loading``."""
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("spawn_partial_state_script.py"))],
                          capture_output=True, text=True, timeout=200, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["head trained: True", "strict: True"]


def test_load_from_checkpoint_strict_defaults_to_strict_loading(tmp_path):
    path = tmp_path / "head.ckpt"
    fit(WithFrozenBackbone(), loader()).save_checkpoint(path)
    with pytest.raises(RuntimeError, match="Missing key"):
        WithFrozenBackbone.load_from_checkpoint(path)
    with pytest.warns(UserWarning, match="not in the checkpoint.*backbone.weight"):
        WithFrozenBackbone.load_from_checkpoint(path, strict=False)

    class Loose(WithFrozenBackbone):
        def __init__(self) -> None:
            super().__init__(strict=False)

    with pytest.warns(UserWarning, match="not in the checkpoint"):
        loaded = Loose.load_from_checkpoint(path, weights_only=True)
    torch.testing.assert_close(loaded.head.weight, torch.load(path, weights_only=True)["state_dict"]["head.weight"])
    with pytest.raises(ValueError, match="in conflict with"):
        Loose.load_from_checkpoint(path, strict=True)


# --- toggled_optimizer ------------------------------------------------------------------------------------------
class TwoOptimizers(Module):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.gen = torch.nn.Linear(4, 4)
        self.disc = torch.nn.Linear(4, 1)
        self.inside: list[tuple[bool, bool]] = []
        self.after: list[tuple[bool, bool]] = []

    def _grads(self) -> tuple[bool, bool]:
        return self.gen.weight.requires_grad, self.disc.weight.requires_grad

    def training_step(self, batch, batch_idx):
        opt_gen, opt_disc = self.optimizers()
        x, _ = batch
        with self.toggled_optimizer(opt_gen):
            self.inside.append(self._grads())
            loss = -self.disc(self.gen(x)).mean()
            opt_gen.zero_grad()
            self.manual_backward(loss)
            opt_gen.step()
        self.after.append(self._grads())
        with self.toggled_optimizer(opt_disc):
            self.inside.append(self._grads())
            loss = self.disc(self.gen(x).detach()).mean()
            opt_disc.zero_grad()
            self.manual_backward(loss)
            opt_disc.step()

    def configure_optimizers(self):
        return torch.optim.SGD(self.gen.parameters(), lr=0.1), torch.optim.SGD(self.disc.parameters(), lr=0.1)


def test_toggled_optimizer_limits_grads_to_that_optimizer_inside_the_block():
    model = TwoOptimizers()
    disc_before = model.disc.weight.detach().clone()
    fit(model, loader(n=16))
    assert model.inside == [(True, False), (False, True)] * 2
    assert model.after == [(True, True)] * 2
    assert not torch.equal(model.disc.weight, disc_before)


def test_toggled_optimizer_restores_on_an_error():
    model = TwoOptimizers()
    optimizer = torch.optim.SGD(model.gen.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="inside"):
        with model.toggled_optimizer(optimizer):
            assert model._grads() == (True, False)
            raise ValueError("inside")
    assert model._grads() == (True, True)


# --- checkpoint hyperparameter keys --------------------------------------------------------------------------
class ConfigModel(Module):
    """``save_hyperparameters(config)``: Lightning restores it as ``__init__(config=...)``."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        self.save_hyperparameters(config)
        self.layer = torch.nn.Linear(config["features"], 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class SizedData(DataModule):
    def __init__(self, batch_size: int = 4, n: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.position = 0

    def train_dataloader(self):
        return DataLoader(regression_data(self.hparams.n), batch_size=self.hparams.batch_size)

    def state_dict(self):
        return {"position": 7}

    def load_state_dict(self, state_dict):
        self.position = state_dict["position"]


def test_checkpoint_keys_are_the_classes_constants(tmp_path):
    assert (Module.CHECKPOINT_HYPER_PARAMS_KEY, Module.CHECKPOINT_HYPER_PARAMS_NAME,
            Module.CHECKPOINT_HYPER_PARAMS_TYPE) == ("hyper_parameters", "hparams_name", "hparams_type")
    assert (DataModule.CHECKPOINT_HYPER_PARAMS_KEY, DataModule.CHECKPOINT_HYPER_PARAMS_NAME) == (
        "datamodule_hyper_parameters", "datamodule_hparams_name")
    path = tmp_path / "c.ckpt"
    trainer = Trainer(**quiet(max_epochs=1))
    trainer.fit(ConfigModel({"features": 4, "lr": 0.1}), datamodule=SizedData(batch_size=8))
    trainer.save_checkpoint(path)
    saved = torch.load(path, weights_only=True)
    assert saved[Module.CHECKPOINT_HYPER_PARAMS_KEY] == {"features": 4, "lr": 0.1}
    assert saved[Module.CHECKPOINT_HYPER_PARAMS_NAME] == "config"
    assert saved[DataModule.CHECKPOINT_HYPER_PARAMS_KEY] == {"batch_size": 8, "n": 16}
    assert saved[DataModule.CHECKPOINT_HYPER_PARAMS_NAME] == "kwargs"
    restored = ConfigModel.load_from_checkpoint(path)
    assert restored.hparams == {"features": 4, "lr": 0.1}
    torch.testing.assert_close(restored.layer.weight, trainer.lightning_module.layer.weight)
    # DataModule.load_from_checkpoint: its hyperparameters (keyword overrides win) and its state_dict
    data = SizedData.load_from_checkpoint(path, n=32)
    assert (data.hparams.batch_size, data.hparams.n, data.position) == (8, 32, 7)
    assert Regression.load_from_checkpoint(fit_and_save(tmp_path), weights_only=True).hparams.lr == 0.05


def fit_and_save(tmp_path: Path) -> Path:
    path = tmp_path / "r.ckpt"
    fit(Regression(), loader()).save_checkpoint(path)
    return path


def test_load_from_checkpoint_takes_the_hyperparameters_of_an_hparams_file(tmp_path):
    """Lightning's ``hparams_file``: the file (YAML or CSV) replaces what the checkpoint holds."""
    path = fit_and_save(tmp_path)
    (tmp_path / "hparams.yaml").write_text("features: 4\nlr: 0.5\n")
    assert Regression.load_from_checkpoint(path, hparams_file=tmp_path / "hparams.yaml").hparams.lr == 0.5
    (tmp_path / "tags.csv").write_text("key,value\nfeatures,4\nlr,0.25\n")
    assert Regression.load_from_checkpoint(path, hparams_file=str(tmp_path / "tags.csv")).hparams.lr == 0.25
    with pytest.raises(ValueError, match=r"\.csv, \.yml or \.yaml is required"):
        Regression.load_from_checkpoint(path, hparams_file=tmp_path / "hparams.json")


def test_load_from_checkpoint_drops_saved_names_init_does_not_take(tmp_path):
    class Grown(Regression):
        def on_fit_start(self):
            self.hparams.note = "added during the run"  # not an __init__ argument

    path = tmp_path / "g.ckpt"
    fit(Grown(), loader()).save_checkpoint(path)
    assert torch.load(path, weights_only=True)["hyper_parameters"]["note"] == "added during the run"
    assert Grown.load_from_checkpoint(path).hparams.lr == 0.05


def test_remove_ignored_hparams_drops_what_a_base_class_saved():
    class Base(Module):
        def __init__(self, lr: float = 0.1, encoder: str = "big") -> None:
            super().__init__()
            self.save_hyperparameters()

    class Child(Base):
        def __init__(self, lr: float = 0.2) -> None:
            super().__init__(lr=lr)
            self.remove_ignored_hparams(["encoder", "absent"])

    assert Base().hparams == {"lr": 0.1, "encoder": "big"}
    assert Child().hparams == {"lr": 0.2}


# --- to_torchscript ------------------------------------------------------------------------------------------------
def test_to_torchscript_script_and_trace_after_a_fit(tmp_path):
    model = Regression()
    fit(model, loader())
    x = torch.randn(3, 4)
    expected = model(x)
    with pytest.deprecated_call(match="TorchScript is deprecated in PyTorch"):
        scripted = model.to_torchscript(file_path=tmp_path / "m.pt")
    torch.testing.assert_close(scripted(x), expected)
    torch.testing.assert_close(torch.jit.load(tmp_path / "m.pt")(x), expected)
    assert model.training  # the mode it had comes back
    model.example_input_array = torch.randn(2, 4)
    traced = model.to_torchscript(method="trace")
    torch.testing.assert_close(traced(x), expected)
    with pytest.raises(ValueError, match="only supports 'script' or 'trace'"):
        model.to_torchscript(method="onnx")
    model.example_input_array = None
    with pytest.raises(ValueError, match="example_inputs"):
        model.to_torchscript(method="trace")


# --- *_dataloader defaults: the Trainer asks the Module only for overridden ones ---------------------------------------
def test_module_loader_defaults_raise_and_are_not_overridden():
    plain = Regression()
    for name in ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"):
        assert not is_overridden(name, plain)
        with pytest.raises(MisconfigurationException, match=f"{name} is not implemented"):
            getattr(plain, name)()
    with pytest.raises(MisconfigurationException, match="implement `def train_dataloader"):
        fit(Regression())


def test_module_loaders_overridden_assigned_or_set_to_none():
    class WithLoaders(Regression):
        def train_dataloader(self):
            return loader(n=16)

        def val_dataloader(self):
            return loader(n=8)

    model = WithLoaders()
    assert is_overridden("train_dataloader", model) and not is_overridden("test_dataloader", model)
    trainer = fit(model, num_sanity_val_steps=0)
    assert trainer.num_training_batches == 2 and trainer.num_val_batches == [1]
    model = WithLoaders()
    model.val_dataloader = None  # Lightning's "no validation"
    trainer = fit(model, num_sanity_val_steps=0)
    assert trainer.num_val_batches == [] and "val_loss" not in trainer.callback_metrics
    model = Regression()
    model.train_dataloader = lambda: loader(n=24)  # assigned on the instance
    assert fit(model).num_training_batches == 3
    model = Regression()
    model.test_dataloader = lambda: loader(n=8)
    assert Trainer(**quiet()).test(model, verbose=False)[0]["test_loss"] > 0


# --- DataModule members ------------------------------------------------------------------------------------------------
class Stream(IterableDataset):
    def __iter__(self):
        return iter([(torch.full((4,), float(i)), torch.zeros(1)) for i in range(4)])


def test_from_datasets_serves_each_dataset_and_forwards_batch_size():
    class Takes(DataModule):
        def __init__(self, batch_size: int = 1, tag: str = "") -> None:
            super().__init__()
            self.batch_size, self.tag = batch_size, tag

    dm = Takes.from_datasets(regression_data(16), val_dataset=[regression_data(8), regression_data(4)],
                             predict_dataset=Stream(), batch_size=4, tag="t")
    assert (dm.batch_size, dm.tag) == (4, "t")
    train = dm.train_dataloader()
    assert train.batch_size == 4 and type(train.sampler).__name__ == "RandomSampler"
    assert [len(v) for v in dm.val_dataloader()] == [2, 1]
    assert [float(b[0][0, 0]) for b in dm.predict_dataloader()] == [0.0]  # an iterable dataset: in order
    with pytest.raises(MisconfigurationException, match="test_dataloader is not implemented"):  # Lightning's type
        dm.test_dataloader()
    with pytest.raises(NotImplementedError):  # and Python's
        dm.test_dataloader()
    class TwoVal(Regression):
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            self.log("val_loss", self._loss(batch))

    trainer = Trainer(**quiet(max_epochs=1, num_sanity_val_steps=0))
    trainer.fit(TwoVal(), datamodule=dm)
    assert trainer.num_training_batches == 4 and trainer.num_val_batches == [2, 1]
    plain = DataModule.from_datasets(regression_data(8), batch_size=8, num_workers=0)
    assert len(plain.train_dataloader()) == 1 and DataModule.name is None and plain.name is None


def test_datamodule_on_exception_runs_after_the_callbacks():
    calls: list = []

    class Fails(Regression):
        def training_step(self, batch, batch_idx):
            raise ValueError("bad batch")

    class Watch(Callback):
        def on_exception(self, trainer, pl_module, exception):
            calls.append(("callback", str(exception)))

    class Data(DataModule):
        def train_dataloader(self):
            return loader()

        def on_exception(self, exception):
            calls.append(("datamodule", str(exception)))

    with pytest.raises(ValueError, match="bad batch"):
        Trainer(**quiet(max_epochs=1, callbacks=[Watch()])).fit(Fails(), datamodule=Data())
    assert calls == [("callback", "bad batch"), ("datamodule", "bad batch")]


def test_a_module_method_named_on_exception_does_not_hide_the_error():
    class Own(Regression):
        def training_step(self, batch, batch_idx):
            raise ValueError("the real error")

        def on_exception(self, exception):  # not a Module hook in Lightning either: not called
            raise AssertionError("called")

    with pytest.raises(ValueError, match="the real error"):
        fit(Own(), loader())


# --- configure_sharded_model (Lightning's deprecated name) ---------------------------------------------------------
def test_configure_sharded_model_is_called_with_a_deprecation_warning():
    class Legacy(Regression):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def configure_sharded_model(self):
            self.calls += 1

    model = Legacy()
    with pytest.warns(DeprecationWarning, match="configure_sharded_model is deprecated"):
        fit(model, loader())
    assert model.calls == 1

    class Both(Legacy):
        def configure_model(self):
            pass

    with pytest.raises(RuntimeError, match="both configure_model and configure_sharded_model"):
        fit(Both(), loader())


class _Configured(Module):
    """The Hydra pattern: one config object in, saved as it came."""

    def __init__(self, cfg) -> None:
        super().__init__()
        self.save_hyperparameters(cfg)
        self.cfg = cfg
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("kind", ["dictconfig", "dict"])
def test_one_saved_config_object_comes_back_as_the_type_it_was(tmp_path, kind):
    """An OmegaConf config (the Hydra pattern) comes back as one, nested attribute access included; a plain dict
    stays a dict, as Lightning passes it."""
    from omegaconf import DictConfig, OmegaConf

    cfg = OmegaConf.create({"optim": {"lr": 0.1}, "width": 3}) if kind == "dictconfig" else {"lr": 0.1, "width": 3}
    trainer = Trainer(default_root_dir=tmp_path, max_steps=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(_Configured(cfg), DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=2))
    path = trainer.checkpoint_callback.best_model_path or trainer.checkpoint_callback.last_model_path
    loaded = _Configured.load_from_checkpoint(path)
    if kind == "dictconfig":
        assert isinstance(loaded.cfg, DictConfig) and loaded.cfg.optim.lr == 0.1
    else:
        assert type(loaded.cfg) is dict and loaded.cfg == {"lr": 0.1, "width": 3}
