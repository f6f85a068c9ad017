"""LightningModule / LightningDataModule members that user code reads or calls: ``dtype``, ``on_gpu``,
``strict_loading``, ``toggled_optimizer``, ``all_gather`` (one process), the ``CHECKPOINT_HYPER_PARAMS_*`` keys,
``to_torchscript``, the ``*_dataloader`` defaults, ``from_datasets``, ``on_exception``, ``load_from_checkpoint``
for a DataModule, ``remove_ignored_hparams`` and ``configure_sharded_model``."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import torch
from torch.utils.data import IterableDataset

from tests.compat.lightning_diff.common import data, exception, loader, quiet


def _kind(err: BaseException) -> dict:
    """What ``except`` clauses see (the message is each framework's own)."""
    seen = exception(err)
    return {"builtin_bases": seen["builtin_bases"], "misconfiguration": seen["misconfiguration"]}


def _is_overridden(fw: SimpleNamespace):
    if fw.name == "lightning":
        from lightning.pytorch.utilities.model_helpers import is_overridden
    else:
        from trainer.utilities.model_helpers import is_overridden
    return is_overridden


class _Stream(IterableDataset):
    def __iter__(self):
        return iter([(torch.full((4,), float(i)), torch.zeros(1)) for i in range(3)])


def checks(fw: SimpleNamespace) -> dict:
    class Net(fw.Module):
        def __init__(self, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 1)
            self.seen: list = []

        def forward(self, x):
            return self.layer(x)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    def run(model, *loaders, ckpt_path=None, datamodule=None, **kwargs):
        trainer = fw.Trainer(**quiet(**{"max_epochs": 1, **kwargs}))
        trainer.fit(model, *loaders, datamodule=datamodule, ckpt_path=ckpt_path)
        return trainer

    def dtype() -> dict:
        class Seen(Net):
            def training_step(self, batch, batch_idx):
                self.seen.append([str(self.dtype), self.on_gpu])
                return super().training_step(batch, batch_idx)

        model = Net()
        out = {"default": str(model.dtype), "on_gpu": model.on_gpu}
        for name, convert in [("double", lambda m: m.double()), ("half", lambda m: m.half()),
                              ("float", lambda m: m.float()), ("to_float64", lambda m: m.to(torch.float64)),
                              ("to_dtype_kw", lambda m: m.to(dtype=torch.float16))]:
            out[name] = str(convert(model).dtype)
        try:
            model.dtype = torch.float64
            out["set"] = "accepted"
        except Exception as err:
            out["set"] = _kind(err)
        seen = Seen()
        run(seen, loader(), precision="64-true", max_steps=1)
        out["in_fit_64_true"] = seen.seen
        return out

    class HeadOnly(Net):
        """Its state_dict leaves the frozen backbone out."""

        def __init__(self, strict: bool | None = None) -> None:
            super().__init__()
            self.backbone = torch.nn.Linear(4, 4).requires_grad_(False)
            if strict is not None:
                self.strict_loading = strict

        def state_dict(self, *args, **kwargs):
            return {k: v for k, v in super().state_dict(*args, **kwargs).items() if not k.startswith("backbone.")}

    def strict_loading() -> dict:
        out = {"default": Net().strict_loading, "set_false": HeadOnly(strict=False).strict_loading}
        run(HeadOnly(), loader()).save_checkpoint("head.ckpt")
        try:
            run(HeadOnly(), loader(), ckpt_path="head.ckpt", max_epochs=2)
            out["strict_resume"] = "ran"
        except Exception as err:
            out["strict_resume"] = _kind(err)
        out["loose_resume_steps"] = run(HeadOnly(strict=False), loader(), ckpt_path="head.ckpt",
                                        max_epochs=2).global_step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            HeadOnly.load_from_checkpoint("head.ckpt", strict=False)
        out["load_non_strict_warns"] = sum("backbone.weight" in str(w.message) for w in caught)
        return out

    class Pair(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.gen, self.disc = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            self.seen: list = []

        def _grads(self) -> list:
            return [self.gen.weight.requires_grad, self.disc.weight.requires_grad]

        def training_step(self, batch, batch_idx):
            opt_gen, opt_disc = self.optimizers()
            with self.toggled_optimizer(opt_gen):
                self.seen.append(["gen", *self._grads()])
                loss = -self.disc(self.gen(batch[0])).mean()
                opt_gen.zero_grad()
                self.manual_backward(loss)
                opt_gen.step()
            self.seen.append(["between", *self._grads()])
            with self.toggled_optimizer(opt_disc):
                self.seen.append(["disc", *self._grads()])

        def configure_optimizers(self):
            return torch.optim.SGD(self.gen.parameters(), lr=0.1), torch.optim.SGD(self.disc.parameters(), lr=0.1)

    def toggled() -> list:
        model = Pair()
        run(model, loader(n=4))
        return model.seen + [["after", *model._grads()]]

    def all_gather_one_process() -> list:
        class Gather(Net):
            def training_step(self, batch, batch_idx):
                gathered = self.all_gather({"x": batch[0], "n": 2, "f": 0.5, "b": True, "l": [torch.tensor(1)]})
                flat = {k: v for k, v in gathered.items() if k != "l"} | {"l0": gathered["l"][0]}
                self.seen.append({k: [list(v.shape), str(v.dtype)] for k, v in sorted(flat.items())})
                return super().training_step(batch, batch_idx)

        model = Gather()
        run(model, loader(n=4))
        return model.seen

    class FromConfig(Net):
        def __init__(self, config: dict) -> None:
            super(Net, self).__init__()
            self.save_hyperparameters(config)
            self.layer = torch.nn.Linear(4, 1)

    class Data(fw.DataModule):
        def __init__(self, batch_size: int = 2, n: int = 8) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.position = 0

        def train_dataloader(self):
            return loader(n=self.hparams.n, batch_size=self.hparams.batch_size)

        def state_dict(self):
            return {"position": 5}

        def load_state_dict(self, state_dict):
            self.position = state_dict["position"]

    def checkpoint_keys() -> dict:
        names = ("KEY", "NAME", "TYPE")
        out = {"module": [getattr(fw.Module, f"CHECKPOINT_HYPER_PARAMS_{n}") for n in names],
               "datamodule": [getattr(fw.DataModule, f"CHECKPOINT_HYPER_PARAMS_{n}") for n in names]}
        trainer = fw.Trainer(**quiet(max_epochs=1))
        trainer.fit(FromConfig({"lr": 0.2, "width": 3}), datamodule=Data(batch_size=4))
        trainer.save_checkpoint("c.ckpt")
        saved = torch.load("c.ckpt", weights_only=False)
        out["saved"] = {key: saved.get(key) for key in (*out["module"], *out["datamodule"])}
        out["module_restored"] = dict(FromConfig.load_from_checkpoint("c.ckpt").hparams)
        dm = Data.load_from_checkpoint("c.ckpt", n=6)
        out["datamodule_restored"] = [dict(dm.hparams), dm.position]
        return out

    def to_torchscript() -> dict:
        model = Net()
        run(model, loader())
        x = torch.randn(3, 4)
        scripted = model.to_torchscript(file_path="m.pt")
        out = {"script_same": torch.allclose(scripted(x), model(x)), "training_after": model.training,
               "loaded_same": torch.allclose(torch.jit.load("m.pt")(x), model(x))}
        model.example_input_array = torch.randn(2, 4)
        out["trace_same"] = torch.allclose(model.to_torchscript(method="trace")(x), model(x))
        for bad in ({"method": "other"}, {"method": "trace", "example_inputs": None}):
            model.example_input_array = None
            try:
                model.to_torchscript(**bad)
                out[bad["method"]] = "accepted"
            except Exception as err:
                out[bad["method"]] = _kind(err)
        return out

    def loader_defaults() -> dict:
        is_overridden = _is_overridden(fw)
        names = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")
        plain = Net()
        out: dict = {"overridden": [is_overridden(n, plain) for n in names]}
        for name in names:
            try:
                getattr(plain, name)()
                out[name] = "returned"
            except Exception as err:
                out[name] = _kind(err)
        try:
            run(Net())
            out["fit_without_loaders"] = "ran"
        except Exception as err:
            out["fit_without_loaders"] = _kind(err)

        class Own(Net):
            def train_dataloader(self):
                return loader(n=8)

            def val_dataloader(self):
                return loader(n=4)

            def validation_step(self, batch, batch_idx):
                self.seen.append("val")

        model = Own()
        out["own_overridden"] = [is_overridden(n, model) for n in names]
        trainer = run(model, num_sanity_val_steps=0)
        out["own"] = [trainer.num_training_batches, len(model.seen)]
        model = Own()
        model.val_dataloader = None
        out["val_none"] = [is_overridden("val_dataloader", model), run(model, num_sanity_val_steps=0).num_val_batches,
                           len(model.seen)]
        model = Net()
        model.train_dataloader = lambda: loader(n=6)
        out["assigned"] = [is_overridden("train_dataloader", model), run(model).num_training_batches]
        return out

    def from_datasets() -> dict:
        class Takes(fw.DataModule):
            def __init__(self, batch_size: int = 1, tag: str = "") -> None:
                super().__init__()
                self.got = [batch_size, tag]

        dm = Takes.from_datasets(data(8), val_dataset=[data(4), data(2)], predict_dataset=_Stream(), batch_size=2,
                                 tag="t")
        train = dm.train_dataloader()
        out = {"init": dm.got, "train": [train.batch_size, type(train.sampler).__name__, len(train)],
               "val": [[v.batch_size, type(v.sampler).__name__, len(v)] for v in dm.val_dataloader()],
               "predict": [b[0][:, 0].tolist() for b in dm.predict_dataloader()], "name": fw.DataModule.name}
        try:
            dm.test_dataloader()
            out["test"] = "returned"
        except Exception as err:
            out["test"] = _kind(err)
        no_kwargs = fw.DataModule.from_datasets(data(8), batch_size=4)
        out["base"] = [len(no_kwargs.train_dataloader()), no_kwargs.name]
        model = Net()
        trainer = run(model, datamodule=dm, limit_val_batches=0)
        out["fit_batches"] = trainer.num_training_batches
        return out

    def on_exception() -> list:
        calls: list = []

        class Fails(Net):
            def training_step(self, batch, batch_idx):
                raise ValueError("bad batch")

        class Watch(fw.Callback):
            def on_exception(self, trainer, pl_module, exception):
                calls.append(["callback", str(exception)])

        class Dm(fw.DataModule):
            def train_dataloader(self):
                return loader()

            def on_exception(self, exception):
                calls.append(["datamodule", str(exception)])

        try:
            fw.Trainer(**quiet(max_epochs=1, callbacks=[Watch()])).fit(Fails(), datamodule=Dm())
        except ValueError as err:
            calls.append(["raised", str(err)])
        return calls

    def remove_ignored() -> list:
        class Base(fw.Module):
            def __init__(self, lr: float = 0.1, encoder: str = "big") -> None:
                super().__init__()
                self.save_hyperparameters()

        class Child(Base):
            def __init__(self, lr: float = 0.2) -> None:
                super().__init__(lr=lr)
                self.remove_ignored_hparams(["encoder", "absent"])

        return [dict(Base().hparams), dict(Child().hparams)]

    def unattached_trainer() -> dict:
        """``self.trainer`` before a fit raises a RuntimeError, inside a property too (scvi-tools' training plans
        read their KL weight through one in ``__init__`` and catch it)."""

        class Plan(Net):
            @property
            def warmup(self) -> object:
                try:
                    return self.trainer.max_epochs
                except RuntimeError:
                    return "not attached"

        plan = Plan()
        try:
            plan.trainer
            direct: object = "attached"
        except Exception as err:
            direct = _kind(err)
        return {"property": plan.warmup, "direct": direct}

    def sharded_model() -> dict:
        class Legacy(Net):
            def configure_sharded_model(self):
                self.seen.append("configure_sharded_model")

        class Both(Legacy):
            def configure_model(self):
                self.seen.append("configure_model")

        model = Legacy()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(model, loader(n=4))
        out = {"calls": model.seen, "deprecation": any(issubclass(w.category, DeprecationWarning) for w in caught)}
        try:
            run(Both(), loader(n=4))
            out["both"] = "ran"
        except Exception as err:
            out["both"] = _kind(err)
        return out

    def summary() -> dict:
        """``ModelSummary(model, max_depth)``: rows, shapes from ``example_input_array``, FLOPs, totals, the table
        (Relay's zero-edit mode serves ``trainer/lightning_compat/impl/model_summary.py`` for Lightning's class)."""
        if fw.name == "lightning":
            from lightning.pytorch.utilities.model_summary import ModelSummary
        else:
            from trainer.lightning_compat.impl.model_summary import ModelSummary

        class Net(fw.Module):
            def __init__(self) -> None:
                super().__init__()
                self.seq = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
                self.lazy = torch.nn.LazyLinear(3)
                self.extra = torch.nn.Parameter(torch.zeros(5))
                self.norm = torch.nn.BatchNorm1d(4).eval()
                self.example_input_array = torch.randn(2, 8)

            def forward(self, x):
                return self.lazy(self.norm(self.seq(x)))

        out = {}
        for depth in (-1, 0, 1, 2):
            found = ModelSummary(Net(), depth)
            out[depth] = {name: getattr(found, name) for name in (
                "layer_names", "layer_types", "in_sizes", "out_sizes", "param_nums", "training_modes",
                "total_training_modes", "total_parameters", "trainable_parameters", "model_size", "total_flops")}
            out[depth]["table"] = str(found)
        return out

    return {
        "module_members_summary": summary,
        "module_members_dtype": dtype,
        "module_members_strict_loading": strict_loading,
        "module_members_toggled_optimizer": toggled,
        "module_members_all_gather": all_gather_one_process,
        "module_members_checkpoint_keys": checkpoint_keys,
        "module_members_to_torchscript": to_torchscript,
        "module_members_loader_defaults": loader_defaults,
        "datamodule_members_from_datasets": from_datasets,
        "datamodule_members_on_exception": on_exception,
        "module_members_remove_ignored_hparams": remove_ignored,
        "module_members_configure_sharded_model": sharded_model,
        "module_members_unattached_trainer": unattached_trainer,
    }
