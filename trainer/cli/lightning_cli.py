"""``LightningCLI`` on Relay: a command line built by jsonargparse from the Module, DataModule and Trainer signatures.

For projects that already drive Lightning with ``LightningCLI`` (``python main.py fit --config c.yaml
--trainer.max_epochs 3 --model.lr 0.1``). Relay's own command line stays ``python -m trainer`` (Hydra); this one
exists so those projects run unchanged. jsonargparse is the optional extra ``relaytrain[cli]``, imported only
when a ``LightningCLI`` or ``LightningArgumentParser`` is built.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial, update_wrapper
from types import MethodType
from typing import TYPE_CHECKING, Any, TypeVar, Union

import torch
from lightning_utilities.core.imports import RequirementCache
from lightning_utilities.core.overrides import is_overridden

from trainer.callbacks.base import Callback
from trainer.datamodule import DataModule
from trainer.errors import MisconfigurationError, MisconfigurationException  # noqa: F401 (Lightning's name here)
from trainer.fabric.utilities.cloud_io import get_filesystem  # noqa: F401 (also Lightning's name here)
from trainer.module import Module
from trainer.seed import seed_everything
from trainer.trainer import Trainer
from trainer.utilities.rank_zero import rank_zero_warn
from trainer.utilities.zero_edit import lightning_defaults

if TYPE_CHECKING:
    from types import ModuleType as _PythonModule

    from jsonargparse import Namespace

_JSONARGPARSE = RequirementCache("jsonargparse[signatures]>=4.27")
# recorded in the saved hyperparameters of what the CLI builds; the zero-edit mode records Lightning's own path
INSTANTIATOR = ("lightning.pytorch.cli.instantiate_module" if os.environ.get("RELAY_LIGHTNING_COMPAT") == "1"
                else "trainer.cli.lightning_cli.instantiate_module")
# the Trainer method arguments each subcommand takes from elsewhere (the model, the data), as Lightning
_SUBCOMMANDS: dict[str, set[str]] = {
    "fit": {"model", "train_dataloaders", "val_dataloaders", "datamodule"},
    "validate": {"model", "dataloaders", "datamodule"},
    "test": {"model", "dataloaders", "datamodule"},
    "predict": {"model", "dataloaders", "datamodule"},
}


def _compat_mode() -> bool:
    return lightning_defaults()


def _dump_header() -> str:
    """The first line of a printed or saved config: what wrote it."""
    if _compat_mode():
        from trainer.lightning_compat.finder import LIGHTNING_API_VERSION  # local import: the zero-edit mode only

        return f"lightning.pytorch=={LIGHTNING_API_VERSION}"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"relaytrain=={version('relaytrain')}"
    except PackageNotFoundError:
        return "relaytrain"


def _register_class_choices() -> None:
    """Import the callbacks, loggers and profilers, so a config can name one by its class name alone
    (``--trainer.callbacks=DeviceStatsMonitor``): jsonargparse finds subclasses among the imported ones. In the
    zero-edit mode, configs name Relay's classes by their Lightning paths."""
    import importlib

    for package in ("trainer.callbacks", "trainer.loggers", "trainer.profilers"):
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            try:
                getattr(module, name)
            except (ImportError, AttributeError):
                continue
    if _compat_mode():
        from trainer.lightning_compat.impl.cli_paths import install_jsonargparse_paths  # local import: zero-edit mode

        install_jsonargparse_paths()


def _jsonargparse() -> _PythonModule:
    if not _JSONARGPARSE:
        raise ModuleNotFoundError(
            f"LightningCLI needs jsonargparse: {_JSONARGPARSE.message}. Install it with "
            "`pip install 'relaytrain[cli]'` (or `pip install 'jsonargparse[signatures]'`)."
        )
    import jsonargparse

    return jsonargparse


class ReduceLROnPlateau(torch.optim.lr_scheduler.ReduceLROnPlateau):
    """torch's ReduceLROnPlateau with the metric to ``monitor`` as an argument, so a config can name it."""

    def __init__(self, optimizer: torch.optim.Optimizer, monitor: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(optimizer, *args, **kwargs)
        self.monitor = monitor


# what ``--lr_scheduler`` accepts (torch's schedulers; ReduceLROnPlateau as the one above, which knows its monitor)
_SCHEDULERS = (torch.optim.lr_scheduler.LRScheduler, ReduceLROnPlateau)

# Lightning's type names for this module, used in users' signatures: ``optimizer: OptimizerCallable = torch.optim.Adam``
# lets a config pick the optimizer class and arguments while the model passes the parameters.
LightningModule = Module
LightningDataModule = DataModule
ModuleType = TypeVar("ModuleType")
_T = TypeVar("_T")
LRSchedulerTypeTuple = _SCHEDULERS
LRSchedulerTypeUnion = Union[torch.optim.lr_scheduler.LRScheduler, torch.optim.lr_scheduler.ReduceLROnPlateau]
LRSchedulerType = Union[type[torch.optim.lr_scheduler.LRScheduler], type[torch.optim.lr_scheduler.ReduceLROnPlateau]]
ArgsType = Union[list[str], dict[str, Any], None]
OptimizerCallable = Callable[[Iterable], torch.optim.Optimizer]
LRSchedulerCallable = Callable[[torch.optim.Optimizer], LRSchedulerTypeUnion]


if _JSONARGPARSE:
    from jsonargparse import ArgumentParser as _ArgumentParser
else:  # the CLI classes still import; building one says what to install
    _ArgumentParser = object


class LightningArgumentParser(_ArgumentParser):
    """jsonargparse's ``ArgumentParser`` with Lightning's helpers for classes, optimizers and schedulers."""

    def __init__(self, *args: Any, description: str = "Relay trainer command line tool", env_prefix: str = "PL",
                 default_env: bool = False, **kwargs: Any) -> None:
        _jsonargparse()
        _register_class_choices()
        super().__init__(*args, description=description, env_prefix=env_prefix, default_env=default_env, **kwargs)
        self.callback_keys: list[str] = []
        self._optimizers: dict[str, tuple[type | tuple[type, ...], str]] = {}
        self._lr_schedulers: dict[str, tuple[type | tuple[type, ...], str]] = {}

    def add_lightning_class_args(
        self,
        lightning_class: Any,
        nested_key: str,
        subclass_mode: bool = False,
        required: bool = True,
    ) -> list[str]:
        """A Module, DataModule, Trainer or Callback class (or a function returning one) as arguments.

        A callback class added this way is built and appended to the Trainer's callbacks (``--my_cb.arg``).
        """
        if isinstance(lightning_class, type) and issubclass(lightning_class, Callback):
            self.callback_keys.append(nested_key)
        if subclass_mode:
            return self.add_subclass_arguments(lightning_class, nested_key, fail_untyped=False, required=required)
        is_trainer = isinstance(lightning_class, type) and issubclass(lightning_class, Trainer)
        return self.add_class_arguments(lightning_class, nested_key, fail_untyped=False,
                                        instantiate=not is_trainer, sub_configs=True)  # the CLI builds the Trainer

    def add_optimizer_args(self, optimizer_class: type[torch.optim.Optimizer] | tuple[type[torch.optim.Optimizer], ...] = (
                           torch.optim.Optimizer,), nested_key: str = "optimizer",
                           link_to: str = "AUTOMATIC") -> None:
        """``--optimizer`` (built later with the model's parameters, so not instantiated by the parser)."""
        self._add_built_later(optimizer_class, nested_key, {"params"}, link_to, self._optimizers)

    def add_lr_scheduler_args(self, lr_scheduler_class: LRSchedulerType | tuple[LRSchedulerType, ...] = _SCHEDULERS, nested_key: str = "lr_scheduler",
                              link_to: str = "AUTOMATIC") -> None:
        """``--lr_scheduler`` (built later with the optimizer)."""
        self._add_built_later(lr_scheduler_class, nested_key, {"optimizer"}, link_to, self._lr_schedulers)

    def _add_built_later(self, classes: type | tuple[type, ...], key: str, skip: set[str], link_to: str,
                         register: dict[str, tuple[type | tuple[type, ...], str]]) -> None:
        if isinstance(classes, tuple):
            self.add_subclass_arguments(classes, key, fail_untyped=False, instantiate=False, skip=skip)
        else:
            self.add_class_arguments(classes, key, fail_untyped=False, instantiate=False, skip=skip)
        register[key] = (classes, link_to)


class SaveConfigCallback(Callback):
    """Saves the parsed config into the run's log directory at setup (rank 0), once per run, as Lightning.

    An existing file is an error unless ``overwrite=True``, so a second run cannot silently replace the first
    run's record; subclass and override ``save_config`` to log the config elsewhere (e.g. to a logger).
    """

    def __init__(self, parser: LightningArgumentParser, config: Namespace, config_filename: str = "config.yaml", overwrite: bool = False,
                 multifile: bool = False, save_to_log_dir: bool = True) -> None:
        self.parser = parser
        self.config = config
        self.config_filename = config_filename
        self.overwrite = overwrite
        self.multifile = multifile
        self.save_to_log_dir = save_to_log_dir
        self.already_saved = False
        if not save_to_log_dir and not is_overridden("save_config", self, SaveConfigCallback):
            raise ValueError(
                "`save_to_log_dir=False` only makes sense when subclassing SaveConfigCallback to implement "
                "`save_config`: with neither, SaveConfigCallback saves nothing."
            )

    def setup(self, trainer: Trainer, pl_module: Module, stage: str | None = None) -> None:
        if self.already_saved:
            return
        if self.save_to_log_dir:
            self._save_to_log_dir(trainer)
        if trainer.is_global_zero:
            self.save_config(trainer, pl_module, str(getattr(stage, "value", stage)))
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)

    def _save_to_log_dir(self, trainer: Trainer) -> None:
        log_dir = trainer.log_dir or trainer.default_root_dir
        path = os.path.join(log_dir, self.config_filename)
        fs = get_filesystem(log_dir)
        if not self.overwrite:
            exists = trainer.strategy.broadcast(fs.isfile(path) if trainer.is_global_zero else False)
            if exists:
                raise RuntimeError(
                    f"{type(self).__name__} expected {path} to NOT exist. Aborting to avoid overwriting results of a "
                    "previous run. Use another log directory (--trainer.default_root_dir), delete the file, set "
                    "`LightningCLI(save_config_callback=None)` to disable config saving, or set "
                    '`LightningCLI(save_config_kwargs={"overwrite": True})` to overwrite it.'
                )
        if trainer.is_global_zero:
            fs.makedirs(log_dir, exist_ok=True)
            keep_nulls = {} if "skip_unset" in inspect.signature(self.parser.save).parameters else {"skip_none": False}
            self.parser.save(self.config, path, overwrite=self.overwrite, multifile=self.multifile, **keep_nulls)

    def save_config(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        """Override to also record the config elsewhere (a logger's hyperparameters, an artifact store)."""


class LightningCLI:
    """Parses the command line or a config into a Module, a DataModule and a Trainer, then runs a subcommand.

    The arguments, defaults and hooks (``add_arguments_to_parser``, ``before_instantiate_classes``,
    ``before_fit``...) are Lightning 2.x's, so an existing ``main.py`` and its YAML configs keep working.
    """

    def __init__(
        self,
        model_class: type[Module] | Callable[..., Module] | None = None,
        datamodule_class: type[DataModule] | Callable[..., DataModule] | None = None,
        save_config_callback: type[SaveConfigCallback] | None = SaveConfigCallback,
        save_config_kwargs: dict[str, Any] | None = None,
        trainer_class: type[Trainer] | Callable[..., Trainer] = Trainer,
        trainer_defaults: dict[str, Any] | None = None,
        seed_everything_default: bool | int = True,
        parser_kwargs: dict[str, Any] | dict[str, dict[str, Any]] | None = None,
        parser_class: type[LightningArgumentParser] | None = None,
        subclass_mode_model: bool = False,
        subclass_mode_data: bool = False,
        args: ArgsType = None,
        run: bool = True,
        auto_configure_optimizers: bool = True,
        load_from_checkpoint_support: bool = True,
    ) -> None:
        self.save_config_callback = save_config_callback
        self.save_config_kwargs = save_config_kwargs or {}
        self.trainer_class = trainer_class
        self.trainer_defaults = trainer_defaults or {}
        self.seed_everything_default = seed_everything_default
        self.parser_kwargs = parser_kwargs or {}
        self.parser_class = parser_class or LightningArgumentParser
        self.auto_configure_optimizers = auto_configure_optimizers
        self.model_class = model_class
        self._model_class = model_class or Module  # what the parser asks for
        self.subclass_mode_model = model_class is None or subclass_mode_model
        self.datamodule_class = datamodule_class
        self._datamodule_class = datamodule_class or DataModule
        self.subclass_mode_data = datamodule_class is None or subclass_mode_data
        self.load_from_checkpoint_support = load_from_checkpoint_support

        main_kwargs, subparser_kwargs = self._setup_parser_kwargs(self.parser_kwargs)
        self.setup_parser(run, main_kwargs, subparser_kwargs)
        self.parse_arguments(self.parser, args)
        self._parse_ckpt_path()
        self.subcommand = self.config["subcommand"] if run else None
        self._set_seed()
        if load_from_checkpoint_support:
            self._add_instantiators()
        self.before_instantiate_classes()
        self.instantiate_classes()
        self.after_instantiate_classes()
        if self.subcommand is not None:
            self._run_subcommand(self.subcommand)

    # --- the parser ---------------------------------------------------------------------------------------
    def _setup_parser_kwargs(self, parser_kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``parser_kwargs`` either for every parser, or per subcommand (``{"fit": {...}}``), as Lightning."""
        subcommand_names = self.subcommands().keys()
        main = {k: v for k, v in parser_kwargs.items() if k not in subcommand_names}
        per_subcommand = {k: v for k, v in parser_kwargs.items() if k in subcommand_names}
        return main, per_subcommand

    def init_parser(self, **kwargs: Any) -> LightningArgumentParser:
        kwargs.setdefault("dump_header", [_dump_header()])
        parser = self.parser_class(**kwargs)
        parser.add_argument("-c", "--config", action=_jsonargparse().ActionConfigFile,
                            help="Path to a configuration file in json or yaml format.")
        return parser

    def setup_parser(self, add_subcommands: bool, main_kwargs: dict[str, Any],
                     subparser_kwargs: dict[str, Any]) -> None:
        self.parser = self.init_parser(**main_kwargs)
        if add_subcommands:
            self._subcommand_method_arguments: dict[str, list[str]] = {}
            self._add_subcommands(self.parser, **subparser_kwargs)
        else:
            self._add_arguments(self.parser)

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument(
            "--seed_everything", type=bool | int, default=self.seed_everything_default,
            help="Seed for random number generators: True picks one (and saves it in the config), False none.",
        )

    def add_core_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(self.trainer_class, "trainer")
        parser.set_defaults({f"trainer.{k}": v for k, v in self.trainer_defaults.items() if k != "callbacks"})
        parser.add_lightning_class_args(self._model_class, "model", subclass_mode=self.subclass_mode_model)
        if self.datamodule_class is not None:
            parser.add_lightning_class_args(self._datamodule_class, "data", subclass_mode=self.subclass_mode_data)
        else:  # any DataModule, optional
            parser.add_lightning_class_args(self._datamodule_class, "data", subclass_mode=True, required=False)

    def _add_arguments(self, parser: LightningArgumentParser) -> None:
        self.add_default_arguments_to_parser(parser)
        self.add_core_arguments_to_parser(parser)
        self.add_arguments_to_parser(parser)
        if self.auto_configure_optimizers:
            if not parser._optimizers:  # the user did not add them in add_arguments_to_parser
                parser.add_optimizer_args((torch.optim.Optimizer,))
            if not parser._lr_schedulers:
                parser.add_lr_scheduler_args(_SCHEDULERS)
        self.link_optimizers_and_lr_schedulers(parser)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Override to add arguments or ``parser.link_arguments(...)``."""

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """The subcommands and the Trainer-method arguments each skips (they come from the model and data)."""
        return {name: set(skip) for name, skip in _SUBCOMMANDS.items()}

    def _add_subcommands(self, parser: LightningArgumentParser, **kwargs: Any) -> None:
        self._subcommand_parsers: dict[str, LightningArgumentParser] = {}
        subcommands = parser.add_subcommands()
        for name in self.subcommands():
            sub = self._prepare_subcommand_parser(self.trainer_class, name, **kwargs.get(name, {}))
            self._subcommand_parsers[name] = sub
            method = getattr(self.trainer_class, name, None)
            doc = (getattr(method, "__doc__", None) or "").strip().splitlines()
            subcommands.add_subcommand(name, sub, help=doc[0] if doc else f"Runs Trainer.{name}.")

    def _prepare_subcommand_parser(self, klass: type, subcommand: str, **kwargs: Any) -> LightningArgumentParser:
        parser = self.init_parser(**kwargs)
        self._add_arguments(parser)
        added = parser.add_method_arguments(klass, subcommand, skip=self.subcommands()[subcommand],
                                            fail_untyped=False)
        self._subcommand_method_arguments[subcommand] = list(added)
        return parser

    @staticmethod
    def link_optimizers_and_lr_schedulers(parser: LightningArgumentParser) -> None:
        """Optimizers and schedulers linked to a model argument (``link_to``) rather than to ``configure_optimizers``:
        a group of subclasses links its ``class_path``/``init_args`` as given; one class gets its path added."""
        for key, (class_type, link_to) in {**parser._optimizers, **parser._lr_schedulers}.items():
            if link_to == "AUTOMATIC":
                continue
            if isinstance(class_type, tuple):
                parser.link_arguments(key, link_to)
            else:
                parser.link_arguments(key, link_to, compute_fn=_class_path_adder(class_type))

    def parse_arguments(self, parser: LightningArgumentParser, args: ArgsType) -> None:
        """``args``: a list parsed like a command line, or a dict / Namespace of values; None reads ``sys.argv``."""
        if args is not None and len(sys.argv) > 1:
            rank_zero_warn(
                "LightningCLI's args parameter is intended to run from within Python like if it were from the command "
                "line. To prevent mistakes it is not recommended to provide both args and command line arguments, got: "
                f"sys.argv[1:]={sys.argv[1:]}, args={args}."
            )
        if isinstance(args, (dict, _jsonargparse().Namespace)):
            self.config = parser.parse_object(args)
        else:
            self.config = parser.parse_args(args)

    def _parse_ckpt_path(self) -> None:
        """With ``--ckpt_path``, the module's arguments come from the hyperparameters the checkpoint saved (they win
        over the config, so the weights fit the model), as Lightning."""
        subcommand = self.config.get("subcommand")
        if not subcommand:
            return
        ckpt_path = self.config[subcommand].get("ckpt_path")
        if not ckpt_path or not os.path.isfile(str(ckpt_path)):
            return
        checkpoint = torch.load(str(ckpt_path), map_location="cpu", weights_only=True)
        hparams = dict(checkpoint.get("hyper_parameters") or {})
        hparams.pop("_instantiator", None)
        if not hparams:
            return
        if "_class_path" in hparams:
            hparams = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        try:
            self.config = self.parser.parse_object({subcommand: {"model": hparams}}, self.config)
        except SystemExit:
            sys.stderr.write("Parsing of ckpt_path hyperparameters failed!\n")
            raise

    def _add_instantiators(self) -> None:
        self.parser.add_instantiator(_record_instantiation(self), Module, subclasses=True, prepend=True)
        self.parser.add_instantiator(_record_instantiation(self), DataModule, subclasses=True, prepend=True)

    def _set_seed(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        seed = config.get("seed_everything")
        if seed is False or seed is None:
            return
        # True: the seed a launching process exported, else 0 (Lightning 2.x's default), saved into the config
        config["seed_everything"] = seed_everything(None if seed is True else seed, workers=True)

    # --- instantiation ------------------------------------------------------------------------------------
    def before_instantiate_classes(self) -> None:
        """Override to change ``self.config`` before the classes are built."""

    def instantiate_classes(self) -> None:
        self.config_init = self.parser.instantiate_classes(self.config)
        self.datamodule = self._get(self.config_init, "data")
        self.model = self._get(self.config_init, "model")
        self._add_configure_optimizers_method_to_model(self.subcommand)
        self.trainer = self.instantiate_trainer()

    def after_instantiate_classes(self) -> None:
        """Override to act on ``self.model``, ``self.datamodule``, ``self.trainer`` before the subcommand runs."""

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        parser = self._parser(self.subcommand)
        extra = [self._get(self.config_init, key) for key in parser.callback_keys]
        config = {**_instantiate_nested(self._get(self.config_init, "trainer", default={})), **kwargs}
        return self._instantiate_trainer(config, extra)

    def _instantiate_trainer(self, config: dict[str, Any], callbacks: list[Callback]) -> Trainer:
        if "callbacks" not in config:  # a trainer class (or function) without a `callbacks` argument
            rank_zero_warn(
                f"The `{getattr(self.trainer_class, '__qualname__', self.trainer_class)}` class does not expose the "
                "`callbacks` argument so they will not be included."
            )
            return self.trainer_class(**config)
        given = config["callbacks"]
        config["callbacks"] = ([] if given is None else list(given) if isinstance(given, (list, tuple))
                               else [given]) + callbacks
        default = self.trainer_defaults.get("callbacks")
        if default is not None:  # a callback given as a class_path/init_args dict is built (as the parser builds them)
            default = _instantiate_nested({"callbacks": default})["callbacks"]
            config["callbacks"] += default if isinstance(default, list) else [default]
        if self.save_config_callback and not config.get("fast_dev_run", False):
            config_callback = self.save_config_callback(
                self._parser(self.subcommand), self.config.get(str(self.subcommand), self.config),
                **self.save_config_kwargs,
            )
            config["callbacks"].append(config_callback)
        return self.trainer_class(**config)

    def _hparams_from_config(self, key: str, links: dict[str, object]) -> dict[str, Any]:
        """The parsed config of ``key`` (``model``/``data``) as hyperparameters, Lightning's way."""
        if not hasattr(self, "config_dump"):
            import yaml

            dumped = self.parser.dump(self.config, skip_link_targets=False, skip_none=False, format="yaml")
            self.config_dump = yaml.safe_load(dumped)
            if "subcommand" in self.config and self.config["subcommand"]:
                self.config_dump = self.config_dump[self.config["subcommand"]]
        hparams = dict(self.config_dump.get(key) or {})
        if "class_path" in hparams:  # subclass mode: the class under `_class_path`, its arguments beside it
            hparams = {"_class_path": hparams["class_path"], **(hparams.get("init_args") or {}),
                       **(hparams.get("dict_kwargs") or {})}
        for target, value in links.items():  # values linked on instantiation are not in the parsed config
            if not target.startswith(f"{key}."):
                continue
            path = target[len(key) + 1:]
            path = path[len("init_args."):] if path.startswith("init_args.") else path
            *parents, last = path.split(".")
            node = hparams
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        return hparams

    def _parser(self, subcommand: str | None) -> LightningArgumentParser:
        return self.parser if subcommand is None else self._subcommand_parsers[subcommand]

    def _get(self, config: Namespace, key: str, default: object = None) -> Any:
        return config.get(str(self.subcommand), config).get(key, default)

    # --- optimizers from the config ----------------------------------------------------------------------
    @staticmethod
    def configure_optimizers(lightning_module: Module, optimizer: torch.optim.Optimizer,
                             lr_scheduler: LRSchedulerTypeUnion | None = None) -> Any:
        """What the model's ``configure_optimizers`` returns when ``--optimizer``/``--lr_scheduler`` are given."""
        if lr_scheduler is None:
            return optimizer
        if isinstance(lr_scheduler, ReduceLROnPlateau):
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": lr_scheduler,
                                                             "monitor": lr_scheduler.monitor}}
        return [optimizer], [lr_scheduler]

    def _add_configure_optimizers_method_to_model(self, subcommand: str | None) -> None:
        """With one 'AUTOMATIC' optimizer group given (and at most one scheduler group), the model's
        ``configure_optimizers`` is replaced by one returning what the config builds, as Lightning does."""
        if not self.auto_configure_optimizers:
            return
        parser = self._parser(subcommand)

        def automatic(base: type | tuple[type, ...], register: dict[str, tuple[type | tuple[type, ...], str]]) -> list[str]:
            out = []
            for key, (classes, link_to) in register.items():
                classes = classes if isinstance(classes, tuple) else (classes,)
                if link_to == "AUTOMATIC" and any(issubclass(c, base) for c in classes):
                    out.append(key)
            return out

        optimizers = automatic(torch.optim.Optimizer, parser._optimizers)
        schedulers = automatic(_SCHEDULERS, parser._lr_schedulers)
        if not optimizers:
            return
        if len(optimizers) > 1 or len(schedulers) > 1:
            raise MisconfigurationError(
                f"`{type(self).__name__}.add_configure_optimizers_method_to_model` expects at most one optimizer "
                f"and one lr_scheduler to be 'AUTOMATIC', but found {optimizers + schedulers}. In this case the "
                "user is expected to link the argument groups and implement `configure_optimizers`: "
                "add_optimizer_args(..., link_to='model.<name>')."
            )
        optimizer_init = self._init_of(parser._optimizers, optimizers[0])
        if not optimizer_init:
            return  # the group was added automatically and nothing was given: the model's own method stays
        scheduler_init = self._init_of(parser._lr_schedulers, schedulers[0]) if schedulers else None
        if is_overridden("configure_optimizers", self.model, Module):
            rank_zero_warn(
                f"`{type(self.model).__name__}.configure_optimizers` will be overridden by "
                f"`{type(self).__name__}.configure_optimizers`."
            )
        optimizer = instantiate_class(self.model.parameters(), optimizer_init)
        scheduler = instantiate_class(optimizer, scheduler_init) if scheduler_init else None
        fn = partial(self.configure_optimizers, optimizer=optimizer, lr_scheduler=scheduler)
        update_wrapper(fn, self.configure_optimizers)  # is_overridden reads the wrapped function
        self.model.configure_optimizers = MethodType(fn, self.model)

    def _init_of(self, register: dict[str, tuple[type | tuple[type, ...], str]], key: str) -> Any:
        """The config of an optimizer/scheduler group; a group of one class gets that class's path."""
        init = self._get(self.config_init, key)
        classes = register[key][0]
        return init if isinstance(classes, tuple) else _with_class_path(classes, init)

    # --- running ------------------------------------------------------------------------------------------
    def _run_subcommand(self, subcommand: str) -> None:
        before = getattr(self, f"before_{subcommand}", None)
        if callable(before):
            before()
        fn = getattr(self, subcommand, None) or getattr(self.trainer, subcommand)
        fn(**self._prepare_subcommand_kwargs(subcommand))
        after = getattr(self, f"after_{subcommand}", None)
        if callable(after):
            after()

    def _prepare_subcommand_kwargs(self, subcommand: str) -> dict[str, Any]:
        config = self.config_init[subcommand]
        kwargs = {k: v for k, v in config.items() if k in self._subcommand_method_arguments[subcommand]}
        kwargs["model"] = self.model
        if self.datamodule is not None:
            kwargs["datamodule"] = self.datamodule
        return kwargs


def _record_instantiation(cli: LightningCLI) -> Callable[..., object]:
    """Builds a Module/DataModule; if it calls ``save_hyperparameters``, its hyperparameters become the *config* it was
    built from (as Lightning records them): nested objects as their ``class_path``/``init_args``, link targets with
    the linked values, in subclass mode the class as ``_class_path``, and ``_instantiator``; so
    ``load_from_checkpoint`` on a base class and ``--ckpt_path`` can rebuild it."""
    def instantiate(class_type: type[_T], *args: Any, applied_instantiation_links: dict | None = None,
                    **kwargs: Any) -> _T:
        obj = class_type(*args, **kwargs)
        hparams = obj.__dict__.get("_hparams")
        if not hparams:  # save_hyperparameters() was not called
            return obj
        key = "model" if isinstance(obj, Module) else "data"
        source = cli._hparams_from_config(key, applied_instantiation_links or {})
        ignored = obj.__dict__.get("_hparams_ignored", frozenset())
        if obj.__dict__.get("_hparams_from_init"):
            given = {k: v for k, v in source.items() if k not in ignored}
        else:  # save_hyperparameters("a", "b"): those names, valued from the config
            given = {k: source.get(k, v) for k, v in hparams.items()}
            if "_class_path" in source:
                given = {"_class_path": source["_class_path"], **given}
        updated = {**given, "_instantiator": INSTANTIATOR}
        for name in ("_hparams", "_hparams_initial"):
            values = obj.__dict__.get(name)
            if values is not None:
                values.clear()
                values.update(updated)
        return obj

    return instantiate


def instantiate_module(class_type: type[ModuleType], config: dict[str, Any]) -> ModuleType:
    """Rebuilds a module the CLI built from its saved hyperparameters (``load_from_checkpoint`` calls it): nested
    ``class_path``/``init_args`` values become objects again, as the CLI built them."""
    parser = _jsonargparse().ArgumentParser(exit_on_error=False)
    config = {k: v for k, v in config.items() if k != "_instantiator"}
    if "_class_path" in config:
        parser.add_subclass_arguments(class_type, "module", fail_untyped=False)
        config = {"class_path": config["_class_path"],
                  "dict_kwargs": {k: v for k, v in config.items() if k != "_class_path"}}
    else:
        parser.add_class_arguments(class_type, "module", fail_untyped=False)
    cfg = parser.parse_object({"module": config})
    return parser.instantiate_classes(cfg).module


def instantiate_class(args: object, init: dict[str, Any]) -> Any:
    """Builds ``init["class_path"]`` with ``args`` positionally and ``init["init_args"]`` as keywords."""
    import importlib

    args = args if isinstance(args, tuple) else (args,)
    module_name, _, class_name = init["class_path"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(*args, **dict(init.get("init_args", {})))


def _with_class_path(class_type: type, init_args: Namespace | dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"class_path": <class_type's path>, "init_args": init_args}`` (a group of one class has no class_path)."""
    if init_args is not None and hasattr(init_args, "as_dict"):
        init_args = init_args.as_dict()
    return {"class_path": f"{class_type.__module__}.{class_type.__name__}", "init_args": init_args or {}}


def _class_path_adder(class_type: type) -> Callable[[Namespace], dict[str, Any]]:
    def add_class_path(init_args: Namespace) -> dict[str, Any]:
        return _with_class_path(class_type, init_args)

    return add_class_path


def _instantiate_nested(config: Namespace | Mapping[str, object]) -> dict[str, Any]:
    """Trainer arguments typed loosely (``Any``) still take ``class_path``/``init_args`` dicts, as Lightning's do."""
    def build(value: object) -> object:
        if isinstance(value, dict) and "class_path" in value:
            return instantiate_class((), value)
        if isinstance(value, list):
            return [build(v) for v in value]
        return value

    return {key: build(value) for key, value in dict(config).items()}


__all__ = ["LightningArgumentParser", "instantiate_module", "LightningCLI", "ReduceLROnPlateau", "SaveConfigCallback",
           "instantiate_class"]
