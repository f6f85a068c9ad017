"""The same calls of Lightning's utilities on Lightning 2.6.6 (``python utils_names_program.py lightning <dir>``
through tests/compat/lightning_diff/harness.py, a process without Relay's zero-edit mode) and on Relay's implementations (``results("relay", dir)`` in the test's
process): test_lightning_names_utils.py compares the two. With ``lightning``, it also writes checkpoints with a real
Lightning Trainer into ``dir`` and records how Lightning resumes from each (``resume``)."""

from __future__ import annotations

import inspect
import json
import os
import sys
import warnings
from types import SimpleNamespace
from argparse import Namespace
from typing import Any

import torch
from torch.utils.data import DataLoader, SequentialSampler

RESUMED = ("step=2", "step=4", "end", "old")


def _names(side: str) -> SimpleNamespace:
    if side == "lightning":
        from lightning.pytorch.callbacks.device_stats_monitor import _prefix_metric_keys
        from lightning.pytorch.callbacks.progress.tqdm_progress import Tqdm
        from lightning.pytorch.core.mixins import HyperparametersMixin
        from lightning.pytorch.loggers.utilities import _scan_checkpoints
        from lightning.pytorch.profilers.pytorch import RegisterRecordFunction
        from lightning.pytorch.trainer.states import RunningStage
        from lightning.pytorch.utilities import _pytree, compile, data, exceptions, model_helpers, parsing
        from lightning.pytorch.utilities.consolidate_checkpoint import _format_checkpoint
        from lightning.pytorch.utilities.migration import utils as migration
        from lightning.pytorch.utilities.upgrade_checkpoint import main as upgrade_main

        strategy: Any = __import__("lightning.pytorch.strategies", fromlist=["x"]).SingleDeviceStrategy("cpu")
        from lightning.pytorch.profilers import AdvancedProfiler, SimpleProfiler

        rich = __import__("lightning.pytorch.callbacks.progress.rich_progress", fromlist=["x"])
        from lightning.pytorch import Trainer
        from lightning.pytorch.demos.boring_classes import BoringModel
        from lightning.pytorch.loggers import TensorBoardLogger
        RichProgressBar = rich.RichProgressBar
        from lightning.pytorch.plugins.precision import DoublePrecision, HalfPrecision, MixedPrecision, Precision

        extras = SimpleNamespace()
        for module, names in EXTRAS.items():
            loaded = __import__(f"lightning.pytorch.{module}", fromlist=["x"])
            for name in names:
                setattr(extras, name, getattr(loaded, name))
    else:
        from trainer.lightning_compat.impl import utils_callbacks, utils_data, utils_helpers, utils_migration
        from trainer.lightning_compat.impl import utils_parsing
        from trainer.model.hparams import HyperparametersMixin
        from trainer.states import RunningStage
        from plugins.strategies.single_device import SingleDeviceStrategy

        _prefix_metric_keys, Tqdm = utils_callbacks._prefix_metric_keys, utils_callbacks.Tqdm
        _scan_checkpoints, RegisterRecordFunction = utils_callbacks._scan_checkpoints, utils_callbacks.RegisterRecordFunction
        _pytree = exceptions = model_helpers = compile = utils_helpers
        _format_checkpoint = utils_helpers._format_checkpoint
        data, parsing, migration, upgrade_main = utils_data, utils_parsing, utils_migration, utils_migration.main
        strategy = SingleDeviceStrategy("cpu")
        from trainer.profilers import AdvancedProfiler, SimpleProfiler
        from trainer import Trainer
        from trainer.callbacks.rich_progress import RichProgressBar
        from trainer.demos.boring_classes import BoringModel
        from trainer.loggers import TensorBoardLogger
        from trainer.callbacks import rich_columns as rich
        from plugins.precision.base import Precision
        from plugins.precision.half import DoublePrecision, HalfPrecision, MixedPrecision
        from trainer.lightning_compat.impl import utils_extras as extras
    return SimpleNamespace(**{k: v for k, v in locals().items() if k != "side"})


EXTRAS = {
    "core.saving": ("_is_imported_subclass", "_convert_loaded_hparams"),
    "core.mixins.hparams_mixin": ("_given_hyperparameters_context",),
    "cli": ("_class_path_from_class", "_global_add_class_path", "_add_class_path_generator", "_get_short_description",
            "_get_module_type", "_set_dict_nested"),
    "utilities.argparse": ("_parse_env_variables", "_defaults_from_env_vars"),
    "utilities.imports": ("_try_import_module",),
    "utilities.model_summary.model_summary": ("_format_summary_table",),
    "callbacks.throughput_monitor": ("_plugin_to_compute_dtype",),
    "accelerators.mps": ("get_device_stats",),
    "profilers.pytorch": ("_default_sort_by_key",),
    "utilities.model_registry": ("_is_registry", "_parse_registry_model_version", "_determine_model_name",
                                 "_determine_model_folder", "find_model_local_ckpt_path"),
}


class Settings:
    """Built from settings."""

    def __init__(self, max_epochs: int = 1, name: str = "x", flag: bool = False) -> None:
        self.seen = (max_epochs, name, flag)


def _extras(n: SimpleNamespace) -> dict[str, Any]:
    e = n.extras
    out: dict[str, Any] = {}
    out["table"] = e._format_summary_table(1234567, 1000, 4.938, {"train": 3, "eval": 1}, 0,
                                           (" ", ["0", "1"]), ("Name", ["layer", "x"]), ("Params", ["1.2 M", "66"]))
    out["empty_table"] = e._format_summary_table(0, 0, 0.0, {"train": 0, "eval": 0}, 5, (" ", []), ("Name", []))
    out["imported"] = [e._is_imported_subclass("torch.nn.Linear", torch.nn.Module),
                       e._is_imported_subclass("torch.nn.Linear", dict), e._is_imported_subclass(3, object),
                       e._is_imported_subclass("not_a_module_anywhere.X", object)]
    out["converted"] = [_plain(e._convert_loaded_hparams({"a": 1})), type(e._convert_loaded_hparams({"a": 1}, "x")).__name__,
                        e._convert_loaded_hparams({"a": 1}, lambda d: sorted(d))]
    nested = {"a": {"b": {"c": 1}}}
    e._set_dict_nested(nested, "a.b.c", 2)
    out["cli"] = [e._class_path_from_class(torch.nn.Linear), e._global_add_class_path(torch.nn.ReLU, {"x": 1}),
                  e._add_class_path_generator(torch.nn.ReLU)({"inplace": True}),
                  e._get_short_description(Settings), e._get_short_description(type("NoDoc", (), {"__doc__": None})),
                  e._get_module_type(Settings).__name__, nested, _error(lambda: e._set_dict_nested(nested, "z.y", 1))]

    def make() -> Settings:
        return Settings()

    out["module_type"] = e._get_module_type(make).__name__ if isinstance(e._get_module_type(make), type) \
        else str(e._get_module_type(make))
    os.environ.update({"PL_SETTINGS_MAX_EPOCHS": "3", "PL_SETTINGS_NAME": "run one", "PL_SETTINGS_FLAG": "",
                       "PL_SETTINGS_OTHER": "1"})
    try:
        parsed = vars(e._parse_env_variables(Settings))

        class FromEnv(Settings):
            @e._defaults_from_env_vars
            def __init__(self, max_epochs: int = 1, name: str = "x", flag: bool = False) -> None:
                super().__init__(max_epochs, name, flag)

        out["env"] = [parsed, list(FromEnv().seen), list(FromEnv(7).seen), list(FromEnv(name="y").seen)]
    finally:
        for key in ("PL_SETTINGS_MAX_EPOCHS", "PL_SETTINGS_NAME", "PL_SETTINGS_FLAG", "PL_SETTINGS_OTHER"):
            del os.environ[key]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["imports"] = [e._try_import_module("json"), e._try_import_module("no_such_module_here"), len(caught)]
    out["sort_key"] = [e._default_sort_by_key({}), e._default_sort_by_key({"use_cuda": True})]
    out["dtypes"] = [str(e._plugin_to_compute_dtype(p)) for p in
                     (n.Precision(), n.DoublePrecision(), n.HalfPrecision("bf16-true"), n.MixedPrecision("bf16-mixed", "cpu"))]
    out["dtype_error"] = _error(lambda: e._plugin_to_compute_dtype("not a plugin"))[:1]
    out["mps_stats"] = sorted(e.get_device_stats())

    out["registry"] = [[e._is_registry(x) for x in ("registry", "REGISTRY:m", "x_registry", "", None)],
                       [e._parse_registry_model_version(x) for x in ("registry:m:version:1.0", "registry:m",
                                                                    "registry:VERSION:v2", "registry")],
                       [e._determine_model_name(x, "dflt") for x in ("registry:m:version:1", "registry:version:v2")],
                       _error(lambda: e._determine_model_name("registry", None)),
                       e._determine_model_folder("org/m:1.0", "/root"),
                       _error(lambda: e._parse_registry_model_version("other"))]
    class Saved(n.HyperparametersMixin):
        def __init__(self, a: int = 1) -> None:
            super().__init__()
            self.save_hyperparameters()

    with e._given_hyperparameters_context({"a": 5, "b": 2}, "pkg.build"):
        given = dict(Saved().hparams)
    out["given"] = [given, dict(Saved(3).hparams)]
    return out


def _plain(value: Any) -> Any:
    """JSON-able, with classes by name (the callback classes differ by package)."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def _error(fn: Any) -> list[str]:
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the type and words are what is compared
        return [type(err).__name__, str(err)]
    return []


def _migration(n: SimpleNamespace, version: str) -> dict[str, Any]:
    m = n.migration
    out: dict[str, Any] = {}
    old = {"pytorch-lightning_version": "0.9.0", "global_step": 3, "epoch": 1, "amp_scaling_state": {"s": 1},
           "checkpoint_callback_best_model_score": 0.5, "early_stop_callback_wait": 2, "early_stop_callback_patience": 4}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        migrated, applied = m.migrate_checkpoint(dict(old))
    out["from_0.9"] = _plain([migrated, applied, sorted(str(w.message) for w in caught)])
    loops_1x = {"fit_loop": {
        "epoch_loop.batch_loop.state_dict": {"x": 1}, "epoch_loop.state_dict": {},
        "epoch_loop.batch_loop.optimizer_loop.optim_progress": {"optimizer_position": 1, "optimizer": {}},
        "epoch_loop.batch_loop.optimizer_loop.state_dict": {}, "epoch_loop.batch_loop.manual_loop.state_dict": {},
        "epoch_loop.batch_loop.manual_loop.optim_step_progress": {"total": {}}},
        "validate_loop": {"dataloader_progress": {}, "epoch_loop.batch_progress": {"a": 1}, "state_dict": {}}}
    callbacks = {"ModelCheckpoint{'monitor': 'x', 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1, "
                 "'train_time_interval': None, 'save_on_train_epoch_end': True}": {"k": 1}, "EarlyStopping{'m': 1}": {}}
    one_eight = {"pytorch-lightning_version": "1.8.0", "global_step": 5, "epoch": 0, "loops": loops_1x,
                 "callbacks": callbacks}
    out["from_1.8"] = _plain(m.migrate_checkpoint(json.loads(json.dumps(one_eight))))
    out["to_1.6"] = _plain(m.migrate_checkpoint({"pytorch-lightning_version": "1.0.0", "global_step": 1, "epoch": 0},
                                                target_version="1.6.0"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        newer = m.migrate_checkpoint({"pytorch-lightning_version": "99.0.0", "x": 1})
    out["newer"] = _plain([newer, [str(w.message).replace(version, "<current>") for w in caught]])
    collide = {"pytorch-lightning_version": "1.8.0", "callbacks": {
        "ModelCheckpoint{'a': 1, 'save_on_train_epoch_end': True}": 1, "ModelCheckpoint{'a': 1, 'save_on_train_epoch_end': False}": 2}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["collide"] = _plain([m.migrate_checkpoint(collide)[0]["callbacks"], len(caught)])
    out["should_upgrade"] = [m._should_upgrade({"pytorch-lightning_version": v}, t, mx)
                             for v, t, mx in (("1.0.0", "1.6.0", None), ("1.6.0", "1.6.0", None),
                                              ("1.0.0", "2.0.0", "1.9.0"), ("1.0.0", "1.9.0", "1.9.0"))]
    legacy = {"pytorch-lightning_version": "0.1.0"}
    m._set_legacy_version(legacy, "0.1.0")
    m._set_legacy_version(legacy, "0.2.0")
    m._set_version(legacy, "1.0.0")
    out["versions"] = [legacy, m._get_version(legacy), _error(lambda: m._get_version({}))[:1]]
    out["mirror"] = [m._patch_pl_to_mirror_if_necessary(x) for x in ("pytorch_lightning", "pytorch_lightning.callbacks",
                                                                     "pytorch_lightningx", "torch.nn")]
    out["pl_migrate"] = _plain(m._pl_migrate_checkpoint({"pytorch-lightning_version": "0.0.1", "global_step": 2,
                                                         "epoch": 0}, "x.ckpt"))
    return out


def _hparams(n: SimpleNamespace) -> dict[str, Any]:
    p = n.parsing
    seen: dict[str, Any] = {}

    class Base(n.HyperparametersMixin):
        def __init__(self, a: int, b: str = "x", *args: Any, **kwargs: Any) -> None:
            super().__init__()
            seen["collected"] = p.collect_init_args(inspect.currentframe(), [], classes=(n.HyperparametersMixin,))
            seen["init_args"] = p.get_init_args(inspect.currentframe())
            p.save_hyperparameters(self, ignore="b", frame=inspect.currentframe())

    class Child(Base):
        def __init__(self, c: float = 1.5, **kwargs: Any) -> None:
            super().__init__(a=1, **kwargs)

    child = Child(c=2.5, extra=7)
    hp = {"keep": 1, "drop": lambda: 1, "also": "s"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.clean_namespace(hp)
    return {"keys": [p.parse_class_init_keys(Base), p.parse_class_init_keys(Child)],
            "collected": seen["collected"], "init_args": seen["init_args"], "saved": dict(child.hparams),
            "name": child._hparams_name, "cleaned": [sorted(hp), [str(w.message) for w in caught]]}


class _Loader(DataLoader):
    def __init__(self, dataset: Any, tag: str, **kwargs: Any) -> None:
        super().__init__(dataset, **kwargs)
        self.tag = tag


class _NoAttr(DataLoader):
    def __init__(self, dataset: Any, secret: int, **kwargs: Any) -> None:
        super().__init__(dataset, **kwargs)


def _data(n: SimpleNamespace) -> dict[str, Any]:
    d = n.data
    loader = _Loader(list(range(10)), "t", batch_size=3, shuffle=True, drop_last=True)
    rebuilt = d._update_dataloader(loader, SequentialSampler(range(10)))
    predict = d._update_dataloader(loader, SequentialSampler(range(10)), mode=n.RunningStage.PREDICTING)
    args, kwargs = d._get_dataloader_init_args_and_kwargs(loader, SequentialSampler(range(10)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lengths = [d.has_len_all_ranks(DataLoader(list(range(4))), n.strategy),
                   d.has_len_all_ranks(DataLoader([]), n.strategy),
                   d.has_len_all_ranks(iter(range(3)), n.strategy)]
    return {"rebuilt": [type(rebuilt).__name__, rebuilt.tag, rebuilt.batch_size, rebuilt.drop_last,
                        type(rebuilt.sampler).__name__, [b.tolist() for b in rebuilt]],
            "predict": [type(predict.batch_sampler).__name__, predict.batch_sampler.drop_last,
                        [b.tolist() for b in predict], predict.batch_sampler.seen_batch_indices],
            "kwargs": [list(args), sorted(kwargs)],
            "missing": _error(lambda: d._update_dataloader(_NoAttr(range(3), 1), SequentialSampler(range(3)))),
            "not_a_loader": _error(lambda: d._get_dataloader_init_args_and_kwargs("a list", None)),
            "lengths": [lengths, sorted({str(w.message) for w in caught})]}


def _helpers(n: SimpleNamespace, tmp: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["format_num"] = [n.Tqdm.format_num(x) for x in (1, 1.0, "1", 1e-5, "abc", 0.1234567, 10000.0, 12.5, "2.")]
    err = ValueError("shape mismatch somewhere", 3, "other")
    n.exceptions._augment_message(err, "shape.*", "better")
    out["augment"] = list(err.args)
    out["format_checkpoint"] = n._format_checkpoint({"model": 1, "optimizer_1": "b", "optimizer_0": "a", "optimizer_x": 0})
    tree = {"a": [1, 2], "b": [[1, torch.tensor(2.0)], (3, "s")], "c": {"x": 1.0}}
    leaves, spec = n._pytree._tree_flatten(tree)
    out["pytree"] = [_plain(leaves), _plain(n._pytree.tree_unflatten(leaves, spec)), spec.num_leaves]
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout())
    mode = n.model_helpers._ModuleMode()
    model[1].eval()
    mode.capture(model)
    model.train()
    mode.restore(model)
    out["module_mode"] = [m.training for m in model.modules()]

    class Restricted:
        @n.model_helpers._restricted_classmethod
        def build(cls, x: int) -> str:
            return f"{cls.__name__}{x}"

    out["restricted"] = [Restricted.build(1), _error(lambda: Restricted().build(1))]
    out["prefix"] = n._prefix_metric_keys({"a": 1.0, "b": 2.0}, "train", "/")
    paths = []
    for i in range(3):
        paths.append(os.path.join(tmp, f"c{i}.ckpt"))
        with open(paths[-1], "w") as f:
            f.write("x")
        os.utime(paths[-1], (1000 + i, 1000 + i))
    callback = SimpleNamespace(last_model_path=paths[2], current_score=0.3, best_model_path=paths[0],
                               best_model_score=0.1, best_k_models={paths[0]: 0.1, paths[1]: 0.2,
                                                                    os.path.join(tmp, "gone.ckpt"): 0.9})
    scanned = n._scan_checkpoints(callback, {paths[1]: 5000})
    out["scan"] = [[os.path.basename(p), s, tag] for _, p, s, tag in scanned]
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    with torch.profiler.profile() as prof, n.RegisterRecordFunction(net):
        net(torch.ones(1, 2))
    out["records"] = sorted({e.name for e in prof.events() if "[pl][module]" in e.name})
    out["model_helpers_errors"] = _error(lambda: n.model_helpers.get_torchvision_model("resnet18"))[:1]
    module = n.BoringModel()
    compiled = torch.compile(module)  # compiled lazily: nothing is compiled unless called
    unwrapped = n.compile.from_compiled(compiled)
    context = sorted(unwrapped._compiler_ctx)
    back = n.compile.to_uncompiled(unwrapped)
    out["compile"] = [unwrapped is module, context, back is module, back._compiler_ctx,
                      _error(lambda: n.compile.to_uncompiled(module))[:1], _error(lambda: n.compile.from_compiled(module)),
                      _error(lambda: n.compile.to_uncompiled(torch.nn.Linear(1, 1)))]
    return out


def _profilers(n: SimpleNamespace, tmp: str) -> dict[str, Any]:
    where = os.path.join(tmp, "profiles")
    advanced = n.AdvancedProfiler(dirpath=where, filename="p", dump_stats=True)
    with advanced.profile("a/b"):
        sum(range(10))
    advanced.describe()
    simple = n.SimpleProfiler()
    errors = [_error(lambda: simple.stop("x")), _error(lambda: advanced.stop("never"))]
    simple.start("x")
    errors.append(_error(lambda: simple.start("x")))
    return {"files": sorted(os.listdir(where)), "errors": errors,
            "sizes": sorted(os.path.getsize(os.path.join(where, f)) > 0 for f in os.listdir(where))}


def _rich(n: SimpleNamespace) -> dict[str, Any]:
    r = n.rich
    progress = r.CustomProgress(r.CustomBarColumn(), r.BatchesProcessedColumn(style="b"), auto_refresh=False,
                                disable=True)
    finite = progress.add_task("train", total=10)
    endless = progress.add_task("stream", total=float("inf"), start=False)
    progress.update(finite, completed=3)
    tasks = {t.id: t for t in progress.tasks}
    batches = r.BatchesProcessedColumn(style="b")
    speed = r.ProcessingSpeedColumn(style="s")
    clock = r.CustomTimeColumn(style="t")
    bar = n.RichProgressBar()
    bar.train_progress_bar_id = finite
    trainer = SimpleNamespace(state=SimpleNamespace(fn="fit"), sanity_checking=False, training=False,
                              progress_bar_callback=bar)
    metrics = r.MetricsTextColumn(trainer, style="m", text_delimiter=" ", metrics_format=".3f")
    metrics.update({"loss": 0.12345, "name": "x", "n": [1]})
    return {"types": [type(t).__name__ for t in progress.tasks],
            "batches": [batches.render(tasks[finite]).plain, batches.render(tasks[endless]).plain],
            "speed": speed.render(tasks[endless]).plain, "clock": clock.render(tasks[endless]).plain,
            "remaining": tasks[endless].time_remaining,
            "metrics": [metrics.render(tasks[finite]).plain, metrics.render(tasks[endless]).plain],
            "pulse": [r.CustomBarColumn().render(tasks[t]).pulse for t in (finite, endless)]}


def _logging(n: SimpleNamespace, tmp: str) -> dict[str, Any]:
    """A logged ``step`` value is the loggers' step; a logger subclass's name/version give its directory; the run
    directory keeps an hparams.yaml."""
    seen: list = []

    class Named(n.TensorBoardLogger):
        @property
        def name(self) -> str:
            return "name"

        @property
        def version(self) -> str:
            return "v"

        def log_metrics(self, metrics: dict, step: int | None = None) -> None:
            seen.append([sorted(metrics), step])
            super().log_metrics(metrics, step)

    class Model(n.BoringModel):
        def on_train_epoch_end(self) -> None:
            self.log_dict({"step": float(10 + self.current_epoch), "acc": 0.5})

    root = os.path.join(tmp, "tb")
    logger = Named(root, sub_dir="sub", default_hp_metric=False)
    trainer = n.Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=0, logger=logger,
                        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                        log_every_n_steps=50, default_root_dir=tmp)
    trainer.fit(Model())
    return {"log_dir": os.path.relpath(logger.log_dir, root), "logged": seen,
            "hparams_yaml": os.path.isfile(os.path.join(root, "name", "v", "sub", "hparams.yaml"))}


def _upgrade(n: SimpleNamespace, tmp: str) -> dict[str, Any]:
    path = os.path.join(tmp, "u.ckpt")
    torch.save({"pytorch-lightning_version": "1.5.0", "global_step": 1, "epoch": 0, "state_dict": {}}, path)
    argv = sys.argv
    sys.argv = ["upgrade_checkpoint.py", path, "--map-to-cpu"]
    try:
        n.upgrade_main()
    finally:
        sys.argv = argv
    upgraded = torch.load(path, weights_only=True)
    upgraded["pytorch-lightning_version"] = "<current>"
    return {"upgraded": upgraded, "backup": os.path.exists(path[:-5] + ".bak")}


def results(side: str, tmp: str) -> dict[str, Any]:
    n = _names(side)
    version = "2.6.6"
    return {"migration": _migration(n, version), "hparams": _hparams(n), "data": _data(n),
            "helpers": _helpers(n, tmp), "upgrade": _upgrade(n, tmp), "extras": _extras(n),
            "profilers": _profilers(n, tmp), "rich": _rich(n),
            "logging": _logging(n, tmp)}


def _write_and_resume(root: str) -> dict[str, Any]:
    """Checkpoints a real Lightning Trainer writes (mid-epoch, at an epoch's end, after fit, and one made to look
    0.9-era: no loop states, old top-level callback keys), and how Lightning resumes from each."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.demos.boring_classes import BoringModel

    quiet = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                 limit_train_batches=4, default_root_dir=root)
    pl.seed_everything(0)
    first = pl.Trainer(max_epochs=1, callbacks=[ModelCheckpoint(dirpath=root, every_n_train_steps=2, save_top_k=-1,
                                                                filename="{step}")], **quiet)
    first.fit(BoringModel())
    first.save_checkpoint(os.path.join(root, "end.ckpt"))
    end = torch.load(os.path.join(root, "end.ckpt"), weights_only=True)
    old = {k: v for k, v in end.items() if k not in ("loops", "callbacks")}
    old.update({"pytorch-lightning_version": "0.9.0", "checkpoint_callback_best_model_score": 0.5,
                "early_stop_callback_wait": 1})
    torch.save(old, os.path.join(root, "old.ckpt"))
    return {name: resume(pl.Trainer, BoringModel, os.path.join(root, name + ".ckpt"), quiet) for name in RESUMED}


def resume(trainer_cls: type, model_cls: type, path: str, quiet: dict) -> list:
    """``[[current_epoch, global_step] at on_train_start, first batch_idx, [current_epoch, global_step] at the end,
    whether the weights at on_train_start are the checkpoint's]``."""
    seen: list = []
    saved = torch.load(path, weights_only=True)["state_dict"]

    class Model(model_cls):  # type: ignore[valid-type, misc]
        def on_train_start(self) -> None:
            seen.append([self.trainer.current_epoch, self.trainer.global_step])
            seen.append(all(torch.equal(v, saved[k]) for k, v in self.state_dict().items()))

        def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
            if len(seen) == 2:
                seen.append(batch_idx)

    trainer = trainer_cls(max_epochs=2, enable_checkpointing=False, **quiet)
    trainer.fit(Model(), ckpt_path=path)
    return [*seen, [trainer.current_epoch, trainer.global_step]]


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message=".*(does not have many workers|GPU available|TPU available|LOCAL_RANK).*")
    from tests.compat.lightning_diff.harness import emit

    where = sys.argv[2]
    emit({"resume": _write_and_resume(where), "calls": results(sys.argv[1], where)})
