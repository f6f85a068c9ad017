"""The Trainer's arguments, declared once: default, type, what is valid, Lightning's name and default, help.

``Trainer.__init__`` validates through :class:`TrainerArguments`; the Hydra schema (``trainer/cli/schema.py``), the
``--help`` text (``trainer/cli/help.py``) and the API table's argument rows (``docs/make_lightning_api.py``) are
generated from its fields, so a new argument is one field here plus one parameter in ``Trainer.__init__`` (kept
written out for IDEs and ``inspect.signature``; ``tests/trainer/test_arguments.py`` keeps the two equal).
"""

# ruff: noqa: RUF009 (`argument(...)` returns a dataclasses.Field, as `field(...)` does)
from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple, TypeVar

from plugins.checkpoint_io import CheckpointIO  # these at run time too: the hints are read (get_type_hints)
from plugins.environments.base import ClusterEnvironment
from plugins.layer_sync import LayerSync
from plugins.precision.base import Precision
from trainer.arguments import checks
from trainer.callbacks.base import Callback  # at run time: the Hydra schema reads these hints (get_type_hints)
from trainer.errors import MisconfigurationError, suggest
from trainer.loggers.base import Logger  # at run time too: jsonargparse (LightningCLI) types values by these
from trainer.profilers.base import Profiler

SAME: object = object()  # "as in Relay" for ArgumentSpec.lightning_default
# one entry of ``Trainer(plugins=...)``: an environment, a checkpoint I/O, a layer sync or a registered name
Plugin = ClusterEnvironment | CheckpointIO | LayerSync | str


class ArgumentValueError(MisconfigurationError):
    """A value an argument does not take; ``argument`` and ``example`` let a front end word its own fix."""

    def __init__(self, message: str, argument: str, example: str) -> None:
        super().__init__(message)
        self.argument, self.example = argument, example


class ArgumentTypeError(ArgumentValueError, TypeError):
    """A value of a type the argument does not take, where Lightning raises a ``TypeError``."""


class ArgumentSpec(NamedTuple):
    """What a field says besides its name, type and default (a record: a tuple, cheaper to define than a dataclass)."""

    help: str  # one line: what the argument does
    valid: str  # what is valid, completing "<name> must be ..."
    example: str  # a value that works, as Python source
    check: checks.Check = checks.anything  # (name, value) -> the value the Trainer keeps
    group: str = "trainer"  # where the Hydra CLI sets it: a key of the `trainer` group, or this config group
    stored: bool = True  # the Trainer keeps the (effective) value as an attribute of the same name
    lightning: str | None = ""  # Lightning's name: "" the same, None Relay's own argument
    lightning_default: object = SAME
    status: str = "supported"  # in the API table: supported | difference | refused
    note: str = ""  # the API table's note (what differs from Lightning)
    lightning_error: str = ""  # Lightning's words for a bad value ({value}), put first: code matches on them
    type_error: bool = False  # Lightning raises a TypeError for a bad value of this one: the error is one too


_T = TypeVar("_T")


def argument(default: _T, help: str, valid: str, example: str, check: checks.Check = checks.anything,
             **spec: Any) -> _T:
    return field(default=default, metadata={"spec": ArgumentSpec(help, valid, example, check, **spec)})


def spec_of(f: dataclasses.Field) -> ArgumentSpec:
    return f.metadata["spec"]


LIMIT = "None (all), an int number of batches, or a float fraction in [0.0, 1.0]"


@dataclass(frozen=True, init=False)
class TrainerArguments:
    """Every ``Trainer`` argument; constructing one checks and normalizes each value (see ``argument_checks``)."""

    accelerator: Any = argument(
        "auto", "The hardware: auto, cpu, gpu, cuda, rocm, xpu, mps, a registered name, or an Accelerator",
        "a name ('auto', 'cpu', 'gpu', ...) or an Accelerator", "'cpu'", group="accelerator", stored=False)
    strategy: Any = argument(
        "auto", "How work is spread: auto, ddp, fsdp, deepspeed, horovod, pipeline, ..., or a Strategy",
        "a registered name ('auto', 'ddp', ...) or a Strategy", "'ddp'", group="strategy", stored=False)
    devices: int | str | list[int] = argument(
        "auto", "Devices per node: a count, -1 or 'auto' (all), or a list of indices",
        "an int, -1, 'auto', or a list of device indices", "2", stored=False)
    num_nodes: int | str = argument(
        1, "Number of machines; 'auto': as many as the launcher reports (elastic `torchrun --nnodes=MIN:MAX`)",
        "an int >= 1, or 'auto'", "2", checks.integer_or_auto(1), status="difference",
        note="also takes 'auto' (the node count torchrun/SLURM report, for elastic jobs whose size changes)")
    precision: int | str | Precision = argument(
        "32-true", "Numeric precision: 32-true, 16-mixed, bf16-mixed, 64-true, ... or a Precision plugin",
        "a precision name ('32-true', 'bf16-mixed', ...) or a Precision", "'bf16-mixed'", group="precision",
        stored=False, lightning_default=None, status="difference",
        note="Lightning's None also means 32-true; `transformer-engine*` values are refused")
    logger: Logger | Iterable[Logger] | bool | None = argument(
        None, "Logger(s): None (TensorBoard, or CSV without tensorboard), False (none), a Logger or a list",
        "None, a bool, a Logger or a list of Loggers", "False", group="logger", stored=False,
        note="also an OmegaConf ListConfig, as `hydra.utils.instantiate` passes it; default directory "
             "`relay_logs/` (`lightning_logs/` in compatibility mode)")
    callbacks: Callback | list[Callback] | None = argument(
        None, "Callbacks added to the default ones (checkpointing, progress bar, model summary)",
        "None, a Callback or a list of Callbacks", "[EarlyStopping('val_loss')]", group="callbacks", stored=False)
    fast_dev_run: int | bool = argument(
        False, "Run n batches (True: 1) of each stage as a smoke test: no logging, no checkpoints",
        "a bool or an int >= 0", "True", checks.fast_dev_run)
    max_epochs: int | None = argument(
        None, "Stop after this many epochs (None: 1000, or no limit when max_steps or max_time is set; -1: none)",
        "an int >= -1 or None", "10", checks.integer(-1, optional=True), stored=False,
        lightning_error="`max_epochs` must be a non-negative integer or -1. You passed in {value}.")
    min_epochs: int | None = argument(
        None, "Train at least this many epochs, even when a callback asks to stop", "an int >= 0 or None", "2",
        checks.integer(0, optional=True), stored=False)
    max_steps: int = argument(-1, "Stop after this many optimizer steps (-1: no limit)", "an int >= -1 (-1: no limit)",
                              "1000", checks.integer(-1), stored=False,
                              lightning_error="`max_steps` must be a non-negative integer or -1. You passed in {value}.")
    min_steps: int | None = argument(
        None, "Train at least this many optimizer steps", "an int >= 0 or None", "100",
        checks.integer(0, optional=True), stored=False)
    max_time: float | str | timedelta | dict[str, int] | None = argument(
        None, "Stop after this wall-clock time: 'DD:HH:MM:SS', a timedelta, a dict like {'hours': 1}, or seconds",
        "'DD:HH:MM:SS', a timedelta, a dict of timedelta keywords, a number of seconds, or None", "'00:12:00:00'",
        checks.max_time)
    limit_train_batches: int | float | None = argument(
        None, "Training batches per epoch: a count or a fraction of the loader", LIMIT, "0.25", checks.limit)
    limit_val_batches: int | float | None = argument(
        None, "Validation batches per run: a count or a fraction (0: no validation)", LIMIT, "10", checks.limit)
    limit_test_batches: int | float | None = argument(
        None, "Test batches: a count or a fraction of the loader", LIMIT, "10", checks.limit)
    limit_predict_batches: int | float | None = argument(
        None, "Prediction batches: a count or a fraction of the loader", LIMIT, "10", checks.limit)
    val_check_interval: int | float | str | timedelta | dict[str, int] | None = argument(
        None, "Validate every n training batches (int), every fraction of an epoch (float), or every "
              "'DD:HH:MM:SS' / timedelta / {'minutes': 10} of wall-clock time",
        "None, an int number of batches, a float in [0.0, 1.0], or a positive duration ('DD:HH:MM:SS', a "
        "timedelta, a dict of timedelta keywords)", "0.25", checks.val_check_interval, status="difference",
        note="time-based values (str, timedelta, dict) validate once that much time has passed, kept in seconds "
             "in `trainer._val_check_time_interval` as in Lightning (`val_check_interval` is then None); the default "
             "is None (Lightning: 1.0), which means the same: once per epoch")
    check_val_every_n_epoch: int | None = argument(
        1, "Validate every n epochs (None: count val_check_interval batches across epochs)", "an int >= 1 or None",
        "2", checks.integer(1, optional=True),
        lightning_error="`check_val_every_n_epoch` should be an integer.")
    num_sanity_val_steps: int | None = argument(
        None, "Validation batches run before training as a check (None: 2; -1: all)", "an int >= -1 or None", "0",
        checks.integer(-1, optional=True))
    log_every_n_steps: int | None = argument(
        None, "Send logged training values to the loggers every n steps (None: 50)", "an int >= 1 or None", "10",
        checks.integer(1, optional=True))
    enable_checkpointing: bool | None = argument(
        None, "Add a ModelCheckpoint unless one is given (None: True)", "True, False or None", "False",
        checks.optional_boolean, stored=False)
    enable_progress_bar: bool | None = argument(
        None, "Show a progress bar (None: True)", "True, False or None", "False", checks.optional_boolean,
        stored=False)
    enable_model_summary: bool | None = argument(
        None, "Print a summary of the model's layers before fit (None: True)", "True, False or None", "False",
        checks.optional_boolean, stored=False)
    overfit_batches: int | float = argument(
        0.0, "Train and validate on the same first n batches (or fraction) every epoch, to debug a model",
        "0, an int number of batches or a float fraction in [0.0, 1.0]", "10", checks.limit)
    reload_dataloaders_every_n_epochs: int = argument(
        0, "Call the *_dataloader hooks again every n epochs (0: never)", "an int >= 0 (0: never reload)", "1",
        checks.integer(0), lightning_error="`reload_dataloaders_every_n_epochs` should be an int >= 0, got {value}.")
    accumulate_grad_batches: int = argument(
        1, "Sum the gradients of n batches before each optimizer step", "an int >= 1", "4", checks.integer(1))
    elastic_batch: str = argument(
        "per_device", "On a resume at another world size: 'per_device' keeps batch and accumulation per process; "
        "'keep_global' adapts accumulate_grad_batches so the global batch stays the checkpoint's",
        "'per_device' or 'keep_global'", "'keep_global'", checks.one_of("per_device", "keep_global"), lightning=None)
    rank_batch_sizes: list[int] | str | None = argument(
        None, "Data-parallel processes with different batch sizes (mixed devices): one size per process, or 'auto' "
        "(set from each rank's measured speed); each step takes one global batch of their sum and weights the "
        "gradients so the update is that global batch's",
        "None, 'auto' or a list of ints >= 1, one per data-parallel process", "[3, 5]", checks.rank_batch_sizes,
        lightning=None)
    gradient_clip_val: float | None = argument(
        None, "Clip gradients to this norm or value (0 or None: no clipping)",
        "a number >= 0 or None (0 or None: no clipping; a negative value would reverse the gradients)", "1.0",
        checks.non_negative_number, lightning_error="`gradient_clip_val` should be an int or a float. Got {value}.",
        type_error=True)
    gradient_clip_algorithm: str | None = argument(
        None, "How gradient_clip_val clips: 'norm' (None) or 'value'", "'norm', 'value' or None", "'value'",
        checks.one_of(None, "norm", "value"),
        lightning_error="`gradient_clip_algorithm` {value} is invalid. Allowed algorithms: ['value', 'norm'].")
    deterministic: bool | str | None = argument(
        None, "Use deterministic algorithms only ('warn': warn instead of failing on a nondeterministic one)",
        "True, False, 'warn' or None", "True", checks.one_of(None, True, False, "warn"))
    default_root_dir: str | os.PathLike | None = argument(
        None, "Where logs and checkpoints go when no logger or callback says otherwise (None: the current directory)",
        "a path or None", "'runs/'", checks.path)
    plugins: Plugin | list[Plugin] | None = argument(
        None, "The cluster environment: a ClusterEnvironment or a registered name (entry points included)",
        "None, one ClusterEnvironment (e.g. SLURMEnvironment()) or a registered environment name; accelerator, "
        "strategy and precision plugins go to their own arguments", "SLURMEnvironment()", checks.environment,
        group="environment", stored=False, status="difference",
        note="one ClusterEnvironment, or the name of a registered one (third-party packages add names through the "
             "`relaytrain.environments` entry points), one CheckpointIO (TorchCheckpointIO, AsyncCheckpointIO or a "
             "subclass) and one LayerSync (TorchSyncBatchNorm or a subclass); precision plugins are refused")
    compile: Any = argument(
        None, "torch.compile the model's blocks (or the whole model): True, or a dict of torch.compile arguments "
        "(backend, mode, fullgraph, dynamic, options) and blocks", "None, True/False, or a dict of torch.compile "
        "arguments", "True", checks.compile_setting, lightning=None)
    activation_checkpointing: Any = argument(
        None, "Recompute the blocks' activations in backward: 'full', 'selective' (keep matmul outputs), 'budget' "
        "(with compile), or a dict with mode, policy, memory_budget and blocks", "None, True/False, 'full', "
        "'selective', 'budget', or a dict", "'selective'", checks.checkpointing_setting, lightning=None)
    detect_anomaly: bool = argument(False, "Run with torch.autograd's anomaly detection", "True or False", "True",
                                    checks.boolean)
    stop_on_nonfinite_loss: bool | None = argument(
        None, "Stop with an error (after a checkpoint) when the loss is NaN or infinite (None: stop, unless "
        "Lightning's defaults hold, in the zero-edit mode, or a SpikeDetection callback handles such losses)",
        "True, False or None", "False", checks.optional_boolean, lightning=None)
    spike_recovery: Any = argument(
        None, "On a loss spike or a non-finite loss, roll back to an in-memory snapshot, skip the offending batches "
        "and continue (None/False: off; True: the defaults; a dict of SpikeRecovery's arguments)",
        "None, True, False, a dict of SpikeRecovery's arguments or a SpikeRecovery",
        "True", checks.spike_recovery, lightning=None)
    preemption_signals: list[str | int] | bool | int | str | None = argument(
        None, "Signals that save a checkpoint and stop (None: SIGTERM and SIGUSR1; []: off)",
        "None, a list of signal names or numbers, or [] (off)", "['SIGTERM']", checks.signals, lightning=None)
    auto_requeue: bool = argument(True, "Requeue the SLURM job after a preemption signal", "True or False", "False",
                                  checks.boolean, lightning=None)
    profiler: Profiler | str | None = argument(
        None, "Time the hooks: None, 'simple', 'advanced', 'pytorch', or a Profiler", "None, a name or a Profiler",
        "'simple'", group="profiler", stored=False)
    benchmark: bool | None = argument(
        None, "Set torch.backends.cudnn.benchmark (None: leave it)", "True, False or None", "True",
        checks.optional_boolean, note="sets `torch.backends.cudnn.benchmark` when not None")
    inference_mode: bool = argument(
        True, "Evaluate under torch.inference_mode (False: torch.no_grad)", "True or False", "False", checks.boolean,
        status="difference", note="accepted and stored; evaluation runs in the strategy's evaluation context")
    use_distributed_sampler: bool = argument(
        True, "Shard the loaders across processes with a distributed sampler", "True or False", "False",
        checks.boolean, note="False: every rank reads the loaders as given")
    sync_batchnorm: bool = argument(
        False, "Turn BatchNorm layers into SyncBatchNorm when several processes train", "True or False", "True",
        checks.boolean, note="BatchNorm layers become SyncBatchNorm when more than one process trains")
    barebones: bool = argument(
        False, "Turn off logger, checkpointing, progress bar and model summary for the least overhead",
        "True or False", "True", checks.boolean, status="difference",
        note="True turns off logger, checkpointing, progress bar and model summary")
    enable_autolog_hparams: bool = argument(
        True, "Log the module's and datamodule's hyperparameters to the loggers", "True or False", "False",
        checks.boolean)
    model_registry: str | None = argument(
        None, "Lightning's cloud model registry: not supported, only None", "None (Relay does not upload to "
        "Lightning's cloud registry)", "None", checks.only_none, stored=False, status="refused",
        note="uploads checkpoints to Lightning AI's cloud model registry (an account and a network CI has not got); "
             "only None is accepted: keep checkpoints with ModelCheckpoint (any fsspec URL) or a logger's "
             "`log_model`")

    def __init__(self, **given: object) -> None:
        """Arguments by keyword, a field's default for any not given, then checked (``__post_init__``). Written here:
        the ``__init__`` a dataclass generates for these fields is compiled from source at every import (8 M
        instructions, valgrind), as much as importing thirty small modules."""
        fields = dataclasses.fields(self)
        for name in given.keys() - {f.name for f in fields}:
            raise TypeError(f"TrainerArguments.__init__() got an unexpected keyword argument {name!r}")
        for f in fields:
            object.__setattr__(self, f.name, given.get(f.name, f.default))
        self.__post_init__()

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            spec, value = spec_of(f), getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, spec.check(f.name, value))
            except checks.InvalidArgument:
                lightning = spec.lightning_error.format(value=value) + " " if spec.lightning_error else ""
                raise (ArgumentTypeError if spec.type_error else ArgumentValueError)(
                    f"{lightning}Trainer({f.name}={value!r}) is not valid: {f.name} must be {spec.valid}. "
                    f"For example: Trainer({f.name}={spec.example}).", f.name, spec.example,
                ) from None
        budget = self.activation_checkpointing is not None and self.activation_checkpointing.needs_compile
        if budget and self.compile is None:
            raise MisconfigurationError(
                "Trainer(activation_checkpointing='budget') is carried out by torch.compile's partitioner: pass "
                "compile=True too (Hydra: trainer.compile=true), or use activation_checkpointing='selective'.")
        if isinstance(self.val_check_interval, float) and self.check_val_every_n_epoch is None:
            raise MisconfigurationError(
                "`val_check_interval` should be an integer or a time-based duration (str 'DD:HH:MM:SS', "
                "datetime.timedelta, or dict kwargs for timedelta) when `check_val_every_n_epoch=None`. "
                f"Trainer(val_check_interval={self.val_check_interval}, check_val_every_n_epoch=None): a fraction of "
                "an epoch needs epochs; pass an int number of batches or a duration, or keep check_val_every_n_epoch."
            )

    @classmethod
    def from_call(cls, given: dict[str, Any]) -> TrainerArguments:
        """From ``Trainer.__init__``'s ``locals()``: an unknown keyword is a TypeError naming the closest argument."""
        names = [f.name for f in dataclasses.fields(cls)]
        for name in given.get("unknown") or {}:
            raise TypeError(f"Trainer.__init__() got an unexpected keyword argument {name!r}. Trainer got an unknown "
                            f"argument {name!r}.{suggest(name, names)} Valid: {', '.join(names)}.")
        args = cls(**{name: given[name] for name in names})
        if args.barebones:  # the values as given (fast_dev_run=1 reads 1, not the True it becomes)
            _check_barebones(given)
        return args

    def effective(self) -> dict[str, Any]:
        """Every argument as the run uses it: None defaults filled in, then ``fast_dev_run``, ``overfit_batches``
        and ``barebones`` applied (Relay keeps fast_dev_run's limits over overfit_batches)."""
        run = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if run["max_epochs"] is None:
            run["max_epochs"] = 1000 if run["max_steps"] == -1 and run["max_time"] is None else -1
        run["num_sanity_val_steps"] = 2 if run["num_sanity_val_steps"] is None else run["num_sanity_val_steps"]
        run["log_every_n_steps"] = 50 if run["log_every_n_steps"] is None else run["log_every_n_steps"]
        run["default_root_dir"] = run["default_root_dir"] or os.getcwd()
        run["min_epochs"], run["min_steps"] = run["min_epochs"] or 0, run["min_steps"] or 0
        if run["overfit_batches"]:  # the same few training batches every epoch, and as many validation batches
            run["limit_train_batches"] = run["limit_val_batches"] = run["overfit_batches"]
        if n := run["fast_dev_run"]:
            run.update(max_epochs=1, max_steps=n, num_sanity_val_steps=0, val_check_interval=1.0, logger=False,
                       check_val_every_n_epoch=1, **{f"limit_{s}_batches": n for s in ("train", "val", "test", "predict")})
        if run["barebones"]:
            run.update(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        return run

    @property
    def val_check_seconds(self) -> float | None:
        """A time-based ``val_check_interval`` in seconds, as the run uses it (None: counted in batches)."""
        interval = self.effective()["val_check_interval"]
        return interval.total_seconds() if isinstance(interval, timedelta) else None

    def trainer_attributes(self, run: Mapping[str, object]) -> dict[str, object]:
        """The attributes the Trainer keeps: each stored argument under its name, a time-based validation interval
        in seconds under Lightning's ``_val_check_time_interval`` (then ``val_check_interval`` is None)."""
        out = {f.name: run[f.name] for f in dataclasses.fields(self) if spec_of(f).stored}
        interval = out["val_check_interval"]
        out["_val_check_time_interval"] = interval.total_seconds() if isinstance(interval, timedelta) else None
        out["val_check_interval"] = None if isinstance(interval, timedelta) else interval
        return out


# barebones=True turns these off; asking for one of them too is Lightning's ValueError: (argument, value that is off,
# what it costs)
_BAREBONES_OFF = (
    ("enable_checkpointing", (None, False), "Checkpointing can impact raw speed so it is disabled in barebones mode."),
    ("logger", (None, False), "Logging can impact raw speed so it is disabled in barebones mode."),
    ("enable_progress_bar", (None, False), "The progress bar can impact raw speed so it is disabled in barebones mode."),
    ("log_every_n_steps", (None, 0), "Logging can impact raw speed so it is disabled in barebones mode."),
    ("enable_model_summary", (None, False), "Model summary can impact raw speed so it is disabled in barebones mode."),
    ("num_sanity_val_steps", (None, 0), "Sanity checking can impact raw speed so it is disabled in barebones mode."),
    ("fast_dev_run", (False, 0), ("Development run is not meant for raw speed evaluation so it is disabled in "
                                  "barebones mode.")),
    ("detect_anomaly", (False,), "Anomaly detection can impact raw speed so it is disabled in barebones mode."),
    ("profiler", (None,), "Profiling can impact raw speed so it is disabled in barebones mode."),
)


def _check_barebones(given: Mapping[str, object]) -> None:
    for name, off, why in _BAREBONES_OFF:
        value = given.get(name)
        if not any(value is o or (type(value) is type(o) and value == o) for o in off):
            raise ArgumentValueError(f"`Trainer(barebones=True, {name}={value!r})` was passed. {why}", name, "False")
