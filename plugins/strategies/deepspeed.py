"""DeepSpeed ZeRO (stages 1, 2, 3, with optional CPU offload) on Relay's own process group and launchers.

The Trainer's loop stays the same; the engine takes the parts DeepSpeed must own:

- ``forward_backward`` runs ``training_step`` through the engine and ``engine.backward`` (which divides
  the loss by the accumulation steps); ``optimizer_step`` is ``engine.step()``. Accumulation and
  gradient clipping come from the Trainer (``accumulate_grad_batches``, ``gradient_clip_val``) into
  DeepSpeed's config (``gradient_accumulation_steps``, ``gradient_clipping``), and Relay's own clipping
  is off, so neither is applied twice. The engine is told which batch ends an accumulation window.
- The optimizer is the one ``configure_optimizers`` returns (a torch optimizer): DeepSpeed's fused
  Adam compiles a C++ extension for ~2 minutes at first use, and the user's optimizer is what single
  device and DDP runs use, so results compare.
- Checkpoints are DeepSpeed's own (``engine.save_checkpoint``) inside Relay's checkpoint directory
  (``plugins/strategies/deepspeed_checkpoint.py``); ``python -m trainer convert-checkpoint`` merges one
  into a single file of full weights.
- bf16: ``precision=bf16-mixed`` (or ``bf16-true``) turns on DeepSpeed's bf16 (bf16 weights, fp32 master
  copy in the optimizer); ``16-mixed`` its fp16 with dynamic loss scaling (GPUs).
- A user's own loop (``Fabric``) drives the same engine as Lightning Fabric does: ``setup(model, optimizer)``
  builds it around both, ``forward`` runs through it, ``backward`` is ``engine.backward`` and the optimizer's
  step ``engine.step()``. Accumulation and clipping then come from DeepSpeed's config alone, so the loop's
  ``no_backward_sync`` is a no-op (with Lightning's warning) and its ``clip_gradients`` an error; the config
  Relay writes leaves both keys to DeepSpeed there (its default clips at norm 1.0, as under Lightning Fabric).

DeepSpeed builds a C++ op (``deepspeed_shm_comm``) with the machine's compiler the first time it starts
its communication layer (about a minute, once): ``TORCH_EXTENSIONS_DIR`` defaults to Relay's cache, one
folder per Python environment, so the build is kept between runs and environments never rebuild each
other's. Machines without a compiler install a prebuilt op instead:
``DS_BUILD_SHM_COMM=1 pip install --no-build-isolation deepspeed``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import functools
import importlib
import io
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.precision.base import Precision
from plugins.strategies.base import under_forward_context
from plugins.strategies.ddp import GRADIENT_STEPS, _StepModule
from plugins.strategies.deepspeed_checkpoint import TAG, DeepSpeedState, mlflow_on_first_use, save_deepspeed
from plugins.strategies.deepspeed_checkpoint import weights_only_loads
from plugins.strategies.parallel import DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT, ParallelStrategy

STAGES = (0, 1, 2, 3)
OFFLOAD_DEVICES = ("none", "cpu", "nvme")
EXTENSIONS_CACHE = Path("~/.cache/relay/torch_extensions")
# Lightning Fabric's words for a loop that clips under DeepSpeed
CLIPPING_REFUSED = ("DeepSpeed handles gradient clipping automatically within the optimizer. Make sure to set the "
                    "`gradient_clipping` value in your Config.")


class DeepSpeedStrategy(ParallelStrategy):
    """``deepspeed.initialize`` around the Module and its optimizer, one process per device."""

    name = "deepspeed"
    joint_setup = True  # deepspeed.initialize takes the module and its optimizer together
    loop_backward_sync = False  # the engine accumulates from its config (gradient_accumulation_steps)
    state_outside_module = "DeepSpeed keeps its own fp32 master weights and partitioned optimizer state"
    loop_clipping_refused = CLIPPING_REFUSED  # and clips from it (gradient_clipping), inside engine.step()

    def __init__(
        self,
        accelerator: Accelerator | None = None,
        precision: Precision | None = None,
        stage: int = 2,
        offload_optimizer: str | bool = "none",
        offload_parameters: str | bool = "none",
        config: str | os.PathLike | Mapping[str, Any] | None = None,
        process_group_backend: str | None = None,
        timeout: float | datetime.timedelta | None = DEFAULT_TIMEOUT,
        logging_level: str = "WARNING",
        max_restarts: int = 0,
        shutdown_timeout: float = 30,
        startup_timeout: float | datetime.timedelta | None = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        super().__init__(accelerator=accelerator, precision=precision, process_group_backend=process_group_backend,
                         timeout=timeout, max_restarts=max_restarts, shutdown_timeout=shutdown_timeout,
                         startup_timeout=startup_timeout)
        if isinstance(stage, bool) or stage not in STAGES:
            raise ValueError(f"DeepSpeedStrategy(stage={stage!r}) is not a ZeRO stage; use 0, 1, 2 or 3, "
                             "e.g. strategy=deepspeed strategy.stage=3")
        self.stage = stage
        self.offload_optimizer = _offload("offload_optimizer", offload_optimizer)
        self.offload_parameters = _offload("offload_parameters", offload_parameters)
        if self.offload_parameters != "none" and stage != 3:
            raise ValueError(f"DeepSpeedStrategy(offload_parameters={offload_parameters!r}) needs stage=3 "
                             f"(got stage={stage}); use strategy.stage=3, or offload_optimizer only.")
        self.user_config = _read_config(config)
        if str(logging_level).upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"DeepSpeedStrategy(logging_level={logging_level!r}): use DEBUG, INFO, WARNING or ERROR.")
        self.logging_level = logging_level.upper()
        self.accumulate_grad_batches = 1
        self.gradient_clip_val: float | None = None
        self._trainer_settings = False  # configure_optimization called: the Trainer's settings go into the config
        self.engine: Any = None
        self._accumulating = False
        self._resume_from: tuple[str, bool] | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    def setup_environment(self) -> None:
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(extensions_cache()))
        # DeepSpeed picks its accelerator by probing (and warns); Relay has chosen one already
        kind = self.accelerator.name if self.accelerator is not None else "cpu"
        os.environ.setdefault("DS_ACCELERATOR", {"rocm": "cuda"}.get(kind, kind))
        super().setup_environment()
        with _quiet(self.logging_level):
            deepspeed = import_deepspeed()
            deepspeed.utils.logger.setLevel(self.logging_level)
            # joins the process group Relay created (or the one Ray/torchrun made); never makes its own
            with _without_shared_memory_inference_op(deepspeed):
                deepspeed.init_distributed(dist_backend=self.process_group_backend, auto_mpi_discovery=False,
                                           timeout=self.timeout, dist_init_required=False)
        # DeepSpeed's ZeRO calls collectives that torch renamed: a warning per rank and run, not the user's to fix
        warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning)

    def configure_optimization(
        self, accumulate_grad_batches: int, gradient_clip_val: float | None, gradient_clip_algorithm: str | None,
    ) -> None:
        if gradient_clip_val and gradient_clip_algorithm == "value":
            raise ValueError(
                f"Trainer(gradient_clip_algorithm='value') is not supported by DeepSpeed, which clips by norm "
                f"(gradient_clip_val={gradient_clip_val}); use trainer.gradient_clip_algorithm=norm."
            )
        self.accumulate_grad_batches = accumulate_grad_batches
        self.gradient_clip_val = gradient_clip_val or None
        self._trainer_settings = True

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        module = module.to(self.root_device)  # DeepSpeed converts dtypes itself (bf16/fp16 from its config)
        self.apply_model_transforms(module)
        self.module = module
        return module

    def setup_optimizers(self, optimizers: list[torch.optim.Optimizer]) -> list[torch.optim.Optimizer]:
        if len(optimizers) != 1:
            raise ValueError(
                f"DeepSpeedStrategy drives exactly one optimizer, but configure_optimizers returned {len(optimizers)}."
                " Return one optimizer (with parameter groups if parts of the model need other settings)."
            )

        deepspeed = import_deepspeed()
        self.engine, optimizer, _, _ = deepspeed.initialize(
            model=_StepModule(self.module), optimizer=optimizers[0], config=self.deepspeed_config(),
            dist_init_required=False,
        )
        if self._resume_from is not None:  # the weights were restored before the engine existed (Lightning's order)
            path, strict = self._resume_from
            self._resume_from = None
            self._load_engine_checkpoint(path, strict)
        return [optimizer]

    def teardown(self) -> None:
        self.engine = None
        super().teardown()

    def deepspeed_config(self) -> dict[str, Any]:
        """DeepSpeed's config: the user's (``config=``) or built from ``stage`` and the offload options,
        with the Trainer's accumulation and clipping and the precision's dtype filled in. A user's own loop (Fabric)
        sets neither: DeepSpeed's config (its defaults: no accumulation, clipping at norm 1.0) decides, as under
        Lightning Fabric."""
        config = copy.deepcopy(self.user_config) if self.user_config is not None else {
            "zero_optimization": self._zero_section()}
        if self._trainer_settings:
            _agree(config, "gradient_accumulation_steps", self.accumulate_grad_batches,
                   "trainer.accumulate_grad_batches")
            _agree(config, "gradient_clipping", float(self.gradient_clip_val or 0.0), "trainer.gradient_clip_val")
        config.setdefault("train_micro_batch_size_per_gpu", 1)  # Relay's loaders decide the batch
        config.setdefault("zero_allow_untested_optimizer", True)  # the user's torch optimizer
        config.setdefault("zero_force_ds_cpu_optimizer", False)
        config.setdefault("steps_per_print", 2**31 - 1)
        name = getattr(self.precision, "name", "32-true")
        if name.startswith("bf16"):
            config.setdefault("bf16", {"enabled": True})
        elif name.startswith("16"):
            config.setdefault("fp16", {"enabled": True})
        return config

    def _zero_section(self) -> dict[str, Any]:
        zero: dict[str, Any] = {"stage": self.stage}
        if self.offload_optimizer != "none":
            zero["offload_optimizer"] = {"device": self.offload_optimizer}
        if self.offload_parameters != "none":
            zero["offload_param"] = {"device": self.offload_parameters}
        return zero

    # --- one step -------------------------------------------------------------------------------
    def step_function(self, module: torch.nn.Module, name: str) -> Callable[..., Any]:
        """``training_step`` (the Trainer) and ``forward`` (a user's loop) run through the engine, whose forward
        gathers ZeRO-3's partitioned parameters and counts the micro-steps."""
        engine = self.engine
        if name not in GRADIENT_STEPS or engine is None:
            return super().step_function(module, name)
        return under_forward_context(self.precision, functools.partial(engine, name))

    def forward_backward(
        self, step_fn: Callable[[Any, int], Any], batch: Any, batch_idx: int, backward: Any
    ) -> torch.Tensor | None:
        engine = self.engine
        if engine is None:
            return super().forward_backward(step_fn, batch, batch_idx, backward)
        backward.zero_grad()
        output = step_fn(batch, batch_idx)
        loss = output.get("loss") if isinstance(output, Mapping) else output
        if loss is None:
            return backward.finished(output)
        engine.set_gradient_accumulation_boundary(not self._accumulating)
        self.backward(loss)
        if self._accumulating:
            engine.step()  # DeepSpeed counts micro-steps in step(); no update inside the window
        return backward.finished(output)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """``engine.backward``: divides by gradient_accumulation_steps, reduces the gradients at the boundary (and
        applies DeepSpeed's fp16 loss scale); a loss made before the engine exists goes the plain way."""
        if self.engine is None:
            return super().backward(loss, *args, **kwargs)
        self.engine.backward(loss, *args, **kwargs)

    def no_backward_sync(self, enabled: bool) -> contextlib.AbstractContextManager:
        """The Trainer's accumulation window: the engine is told which backward ends it (``forward_backward``)."""
        return self._window(enabled)

    @contextlib.contextmanager
    def _window(self, accumulating: bool) -> Iterator[None]:
        self._accumulating = accumulating
        try:
            yield
        finally:
            self._accumulating = False

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Callable[[], Any]) -> Any:
        if self.engine is None:
            return super().optimizer_step(optimizer, closure)
        result = closure()
        self.engine.step()  # clips (gradient_clipping), steps the optimizer, zeroes the gradients
        return result

    def clip_gradients(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, value: float,
                       algorithm: str) -> None:
        """DeepSpeed clips inside ``engine.step()`` (``gradient_clipping`` in its config)."""

    # --- state layout ---------------------------------------------------------------------------
    def module_state_dict(self, module: torch.nn.Module) -> dict[str, Any]:
        return {} if self.engine is not None else module.state_dict()  # the engine saves the weights

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return {}  # the engine saves every rank's partition

    def load_module_state_dict(self, module: torch.nn.Module, state: Any, strict: bool = True) -> None:
        if isinstance(state, DeepSpeedState) and self.engine is not None:
            self._load_engine_checkpoint(state.path, strict)
            return
        if isinstance(state, DeepSpeedState):
            # before the engine exists: the merged full weights now (all an evaluation needs); a fit then loads
            # the engine's own files, optimizer partitions included, as soon as setup_optimizers builds it
            self._resume_from = (state.path, strict)
            state = state.full_state_dict()
        if self.engine is not None and self.stage == 3:
            raise ValueError(
                "strategy=deepspeed stage=3 resumes from DeepSpeed checkpoints only; this one is a full-weights "
                "file. Load it with stage 1 or 2, or start from its weights in configure_model."
            )
        super().load_module_state_dict(module, state, strict)
        if self.engine is not None and hasattr(self.engine.optimizer, "refresh_fp32_params"):
            self.engine.optimizer.refresh_fp32_params()  # ZeRO's fp32 master copy follows the loaded weights

    def _load_engine_checkpoint(self, path: str, strict: bool) -> None:
        with weights_only_loads():
            loaded, _ = self.engine.load_checkpoint(os.fspath(path), tag=TAG, load_module_strict=strict,
                                                    load_optimizer_states=True, load_lr_scheduler_states=False)
        if loaded is None:
            raise ValueError(f"DeepSpeed could not load the checkpoint at {path}.")

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer, state: Any) -> None:
        if isinstance(state, DeepSpeedState):
            return  # loaded with the module by engine.load_checkpoint
        raise ValueError(
            "strategy=deepspeed resumes optimizer state from DeepSpeed checkpoints only; this checkpoint was "
            "written by another strategy. Start from its weights (fit without ckpt_path after loading them)."
        )

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str, layout_keys: tuple[str, ...] = ()) -> None:
        if self.engine is None:
            return super().save_checkpoint(checkpoint, path, layout_keys)
        save_deepspeed(checkpoint, path, self, layout_keys)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"world_size={self.world_size}, stage={self.stage})")


@contextlib.contextmanager
def _quiet(level: str) -> Iterator[None]:
    """DeepSpeed's start-up chatter (distutils warnings from its op builder, "built successfully" prints)
    is hidden unless its logging level asks for INFO or DEBUG; errors still raise."""
    if level in ("INFO", "DEBUG"):
        yield
        return
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore", UserWarning)
        yield


@contextlib.contextmanager
def _without_shared_memory_inference_op(deepspeed: Any) -> Iterator[None]:
    """DeepSpeed's CPU backend builds its shared-memory all-reduce op (C++, compiled on first use) when it starts,
    for ``inference_all_reduce``, which training never calls. Building it first probes every op with the compiler,
    then compiles for 1-3 min on 2 cores while every other rank waits on the build folder's lock (measured: a Ray
    ZeRO-3 test spent ~100 s there). While Relay starts DeepSpeed's backend, that op's builder is "not available",
    which DeepSpeed handles by using torch.distributed's all-reduce."""
    accelerator = deepspeed.accelerator.get_accelerator()
    own, create = vars(accelerator).get("create_op_builder"), accelerator.create_op_builder
    accelerator.create_op_builder = lambda name: None if name == "ShareMemCommBuilder" else create(name)
    try:
        yield
    finally:
        if own is None:
            del accelerator.create_op_builder  # the class's method again
        else:
            accelerator.create_op_builder = own


def extensions_cache() -> Path:
    """Where DeepSpeed's C++ ops are built: one folder per Python environment and torch version.

    Torch keys a built op by its name only, so two environments sharing a folder (two virtualenvs of one
    user, whose compile flags name different paths) would rebuild it on every start, each for the other.
    """
    import hashlib
    import sys

    tag = hashlib.sha1(f"{sys.prefix}|{torch.__version__}".encode()).hexdigest()[:10]
    return EXTENSIONS_CACHE.expanduser() / f"py{sys.version_info[0]}{sys.version_info[1]}-{tag}"


def import_deepspeed() -> Any:
    try:
        with mlflow_on_first_use():
            import deepspeed
    except ImportError:
        raise ValueError(
            "strategy=deepspeed needs DeepSpeed, which is not installed: pip install 'relaytrain[deepspeed]' "
            "(on a machine without a C++ compiler: DS_BUILD_SHM_COMM=1 pip install --no-build-isolation deepspeed)."
        ) from None
    _import_muon_compiled_at_first_call(deepspeed)
    return deepspeed


def _import_muon_compiled_at_first_call(deepspeed: Any) -> None:
    """DeepSpeed imports its Muon optimizer to compare every optimizer's class with it (``deepspeed.initialize``, each
    ZeRO gradient reduction), and that import wraps its kernels in ``torch.compile``, which imports torch's inductor:
    ~1.8 CPU-seconds per rank of every run, with or without Muon. Imported here with each kernel compiled at its first
    call instead: what ``torch.compile`` does anyway, less the import of a compiler no other optimizer uses."""
    muon = "deepspeed.runtime.zero.muon.original_muon"
    compiler = getattr(getattr(deepspeed, "runtime", None), "compiler", None)
    if muon in sys.modules or not callable(getattr(compiler, "compile", None)):
        return
    eager = compiler.compile
    compiler.compile = _compile_at_first_call
    try:
        importlib.import_module(muon)
    except ImportError:
        pass  # a DeepSpeed without Muon
    finally:
        compiler.compile = eager


def _compile_at_first_call(**options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``torch.compile(**options)`` as a decorator whose ``torch.compile`` call waits for the function's first call."""
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        compiled: list[Callable[..., Any]] = []

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not compiled:
                compiled.append(torch.compile(function, **options))
            return compiled[0](*args, **kwargs)
        return call
    return decorate


def _offload(argument: str, value: str | bool | None) -> str:
    device = "cpu" if value is True else "none" if value in (False, None) else value
    if device not in OFFLOAD_DEVICES:
        raise ValueError(f"DeepSpeedStrategy({argument}={value!r}) is not valid; use one of "
                         f"{', '.join(OFFLOAD_DEVICES)} "
                         f"(or true for cpu), e.g. strategy.{argument}=cpu")
    return device


def _read_config(config: str | os.PathLike | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if config is None:
        return None
    if isinstance(config, Mapping):
        return dict(config)
    path = Path(config).expanduser()
    if not path.is_file():
        raise ValueError(f"DeepSpeedStrategy(config={str(config)!r}): no such file. Pass a DeepSpeed JSON config "
                         "file or a dict, e.g. strategy.config=ds_config.json")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"DeepSpeedStrategy(config={str(config)!r}) is not valid JSON: {err}.") from None


def _agree(config: dict[str, Any], key: str, value: Any, trainer_key: str) -> None:
    """The Trainer's setting goes into DeepSpeed's config; a different value already there is an error."""
    given = config.get(key, "auto")
    if given not in ("auto", value) and not (key == "gradient_clipping" and value == 0.0):
        raise ValueError(
            f"The DeepSpeed config sets {key}={given!r} but {trainer_key}={value!r}; set it in one place "
            f"(remove {key} from the DeepSpeed config, or pass {trainer_key}={given})."
        )
    if key == "gradient_clipping" and value == 0.0 and given not in ("auto", 0.0):
        return  # the DeepSpeed config clips and the Trainer does not: keep DeepSpeed's
    config[key] = value
