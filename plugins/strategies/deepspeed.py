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
- Lightning's arguments and their DeepSpeed config: ``deepspeed_config.py``; Lightning Fabric's strategy-level
  checkpoint calls (``save_checkpoint(path, state)``): ``deepspeed_engine_state.py``; DeepSpeed's import and start-up:
  ``deepspeed_import.py``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import functools
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from plugins.accelerators.base import Accelerator
from plugins.precision.base import Precision
from plugins.strategies.base import under_forward_context
from plugins.strategies.ddp import GRADIENT_STEPS, _StepModule
from plugins.strategies.deepspeed_checkpoint import (
    TAG,
    DeepSpeedState,
    save_deepspeed,
    weights_only_loads,
)
from plugins.strategies.deepspeed_config import (
    ENV_VAR,
    agree,
    check_device_indices,
    check_stage,
    default_config,
    format_precision,
    level_number,
    load_config,
    offload_setting,
    zero_stage,
)
from plugins.strategies.deepspeed_engine_state import (
    check_checkpoint_directory,
    load_engine_checkpoint,
    load_state_file,
    save_engine_checkpoint,
)
from plugins.strategies.deepspeed_import import (
    extensions_cache,
    import_deepspeed,
    quiet,
    without_shared_memory_inference_op,
)
from plugins.strategies.parallel import DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT, ParallelStrategy

# Lightning Fabric's words for a loop that clips under DeepSpeed
CLIPPING_REFUSED = ("DeepSpeed handles gradient clipping automatically within the optimizer. Make sure to set the "
                    "`gradient_clipping` value in your Config.")


class DeepSpeedStrategy(ParallelStrategy):
    """``deepspeed.initialize`` around the Module and its optimizer, one process per device."""

    name = "deepspeed"
    # the module, held by the engine (its partitions, its optimizer's master weights): it stays on its devices between
    # calls (Lightning's DeepSpeed strategy moves it to the CPU; Relay's engine keeps it where it was built)
    module_stays_on_device = True
    handles_gradient_accumulation = True  # the engine accumulates (``configure_optimization``), as in Lightning
    lightning_restore_optimizer = False  # the engine restores its optimizer from its own checkpoint files
    DEEPSPEED_ENV_VAR = ENV_VAR  # Lightning's: a JSON config file used when none is passed
    joint_setup = True  # deepspeed.initialize takes the module and its optimizer together
    loop_backward_sync = False  # the engine accumulates from its config (gradient_accumulation_steps)
    state_outside_module = "DeepSpeed keeps its own fp32 master weights and partitioned optimizer state"
    loop_clipping_refused = CLIPPING_REFUSED  # and clips from it (gradient_clipping), inside engine.step()

    def __init__(
        self,
        accelerator: Accelerator | None = None,
        zero_optimization: bool = True,
        stage: int = 2,
        remote_device: str | None = None,
        offload_optimizer: bool | str = False,
        offload_parameters: bool | str = False,
        offload_params_device: str = "cpu",
        nvme_path: str = "/local_nvme",
        params_buffer_count: int = 5,
        params_buffer_size: int = 100_000_000,
        max_in_cpu: int = 1_000_000_000,
        offload_optimizer_device: str = "cpu",
        optimizer_buffer_count: int = 4,
        block_size: int = 1048576,
        queue_depth: int = 8,
        single_submit: bool = False,
        overlap_events: bool = True,
        thread_count: int = 1,
        pin_memory: bool = False,
        sub_group_size: int = 1_000_000_000_000,
        contiguous_gradients: bool = True,
        overlap_comm: bool = True,
        allgather_partitions: bool = True,
        reduce_scatter: bool = True,
        allgather_bucket_size: int = 200_000_000,
        reduce_bucket_size: int = 200_000_000,
        zero_allow_untested_optimizer: bool = True,
        logging_batch_size_per_gpu: int | str | None = None,
        config: str | os.PathLike | Mapping[str, Any] | None = None,
        logging_level: int | str = logging.WARNING,
        parallel_devices: list[torch.device] | None = None,
        cluster_environment: Any = None,
        loss_scale: float = 0,
        initial_scale_power: int = 16,
        loss_scale_window: int = 1000,
        hysteresis: int = 2,
        min_loss_scale: int = 1,
        partition_activations: bool = False,
        cpu_checkpointing: bool = False,
        contiguous_memory_optimization: bool = False,
        synchronize_checkpoint_boundary: bool = False,
        load_full_weights: bool = False,
        precision: Precision | None = None,
        process_group_backend: str | None = None,
        timeout: float | datetime.timedelta | None = DEFAULT_TIMEOUT,
        exclude_frozen_parameters: bool = False,
        *,
        precision_plugin: Precision | None = None,  # the Trainer-side name of ``precision`` (lightning.pytorch)
        max_restarts: int = 0,
        shutdown_timeout: float = 30,
        startup_timeout: float | datetime.timedelta | None = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        """Lightning's arguments, defaults and meaning (``deepspeed_config.py`` maps them into DeepSpeed's config);
        ``max_restarts``, ``shutdown_timeout`` and ``startup_timeout`` are Relay's, as for every parallel strategy."""
        super().__init__(accelerator=accelerator, precision=precision or precision_plugin,
                         process_group_backend=process_group_backend, timeout=timeout, max_restarts=max_restarts,
                         shutdown_timeout=shutdown_timeout, startup_timeout=startup_timeout)
        check_stage(stage)
        self.config = load_config(config)
        if self.config is None:
            self.config = default_config(
                zero_optimization, zero_allow_untested_optimizer, logging_batch_size_per_gpu,
                offload_setting("offload_optimizer", offload_optimizer, offload_optimizer_device),
                offload_setting("offload_parameters", offload_parameters, offload_params_device), nvme_path,
                params_buffer_count=params_buffer_count, params_buffer_size=params_buffer_size, max_in_cpu=max_in_cpu,
                optimizer_buffer_count=optimizer_buffer_count, pin_memory=pin_memory,
                activation_checkpointing={
                    "partition_activations": partition_activations, "cpu_checkpointing": cpu_checkpointing,
                    "contiguous_memory_optimization": contiguous_memory_optimization,
                    "synchronize_checkpoint_boundary": synchronize_checkpoint_boundary},
                aio={"block_size": block_size, "queue_depth": queue_depth, "single_submit": single_submit,
                     "overlap_events": overlap_events, "thread_count": thread_count},
                stage=stage, contiguous_gradients=contiguous_gradients, overlap_comm=overlap_comm,
                allgather_partitions=allgather_partitions, reduce_scatter=reduce_scatter,
                allgather_bucket_size=allgather_bucket_size, reduce_bucket_size=reduce_bucket_size,
                sub_group_size=sub_group_size,
            )
        self.logging_level = level_number(logging_level)
        self._parallel_devices = list(parallel_devices) if parallel_devices is not None else None
        if cluster_environment is not None:
            self.environment = cluster_environment
        self.remote_device = remote_device
        self.load_full_weights = load_full_weights
        self.exclude_frozen_parameters = exclude_frozen_parameters
        self.loss_scale = loss_scale  # DeepSpeed's fp16 loss scaling (0: dynamic)
        self.initial_scale_power = initial_scale_power
        self.loss_scale_window = loss_scale_window
        self.hysteresis = hysteresis
        self.min_loss_scale = min_loss_scale
        self.accumulate_grad_batches = 1
        self.gradient_clip_val: float | None = None
        self._trainer_settings = False  # configure_optimization called: the Trainer's settings go into the config
        self.engine: Any = None
        self._accumulating = False
        self._resume_from: tuple[str, bool] | None = None

    @property
    def stage(self) -> int:
        """The ZeRO stage of the config in use (0 where it has no ZeRO section)."""
        return zero_stage(self.config)

    @property
    def zero_stage_3(self) -> bool:
        return self.stage == 3

    @property
    def model(self) -> Any:
        """The DeepSpeed engine, once built."""
        return self.engine

    @property
    def deepspeed_engine(self) -> Any:
        """Lightning's name for the engine."""
        return self.engine

    @property
    def parallel_devices(self) -> list[torch.device] | None:
        """One device per local process: the user's (Lightning's argument), else the chosen accelerator's."""
        if self._parallel_devices is not None or self.accelerator is None:
            return self._parallel_devices
        device_for = getattr(self.accelerator, "device_for", None)
        if not callable(device_for):
            return None
        return [device_for(rank, self.device_ids) for rank in range(len(self.device_ids))]

    @parallel_devices.setter
    def parallel_devices(self, devices: list[torch.device] | None) -> None:
        self._parallel_devices = list(devices) if devices is not None else None

    @property
    def root_device(self) -> torch.device:
        if self._parallel_devices:  # chosen by the user: one per local rank
            return self._parallel_devices[self.local_rank]
        return super().root_device

    # --- lifecycle ------------------------------------------------------------------------------
    def setup_environment(self) -> None:
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(extensions_cache()))
        # DeepSpeed picks its accelerator by probing (and warns); Relay has chosen one already
        kind = getattr(self.accelerator, "name", None)
        kind = kind if isinstance(kind, str) else "cpu"
        super().setup_environment()
        os.environ.setdefault("DS_ACCELERATOR", {"rocm": "cuda"}.get(kind, kind))
        os.environ.setdefault("LOCAL_RANK", str(self.local_rank))  # DeepSpeed asserts it (one process, no launcher)
        with quiet(self.logging_level):
            deepspeed = import_deepspeed()
            deepspeed.utils.logger.setLevel(self.logging_level)
            # joins the process group Relay created (or the one Ray/torchrun made); never makes its own
            with without_shared_memory_inference_op(deepspeed):
                deepspeed.init_distributed(dist_backend=self.process_group_backend, auto_mpi_discovery=False,
                                           timeout=self.timeout, dist_init_required=False)
        # DeepSpeed's ZeRO calls collectives that torch renamed: a warning per rank and run, not the user's to fix
        warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning)

    def _init_process_group(self) -> None:
        if self._parallel_devices:  # after the device is set up, before any process joins (Lightning's order)
            check_device_indices(self._parallel_devices)
        super()._init_process_group()

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
        """The engine around the module and its one optimizer. Under the Trainer, a DeepSpeed config with an
        ``optimizer`` section builds DeepSpeed's own optimizer (and ``scheduler``) instead, as Lightning does."""
        config = self.deepspeed_config()
        from_config = self._trainer_settings and "optimizer" in config
        if len(optimizers) > 1 or not (optimizers or from_config):
            raise ValueError(
                f"DeepSpeedStrategy drives exactly one optimizer, but configure_optimizers returned {len(optimizers)}."
                " Return one optimizer (with parameter groups if parts of the model need other settings)."
            )
        if from_config and any(group["params"] for o in optimizers for group in o.param_groups):
            warnings.warn("The DeepSpeed config has an `optimizer` section: DeepSpeed builds that optimizer, and the one "
                          "configure_optimizers returned is not used.", UserWarning, stacklevel=2)
        deepspeed = import_deepspeed()
        self.engine, optimizer, _, _ = deepspeed.initialize(
            model=_StepModule(self.module), optimizer=None if from_config else optimizers[0], config=config,
            model_parameters=[p for p in self.module.parameters() if p.requires_grad] if from_config else None,
            dist_init_required=False,
        )
        self._configure_activation_checkpointing(deepspeed)
        if self._resume_from is not None:  # the weights were restored before the engine existed (Lightning's order)
            path, strict = self._resume_from
            self._resume_from = None
            self._load_engine_checkpoint(path, strict)
        return [optimizer]

    def teardown(self) -> None:
        self.engine = None
        super().teardown()

    def setup_module_and_optimizers(self, module: torch.nn.Module, optimizers: list[torch.optim.Optimizer],
                                    scheduler: Any = None) -> tuple[Any, list[Any], Any]:
        """Lightning's call for code that drives the engine itself: ``deepspeed.initialize`` around ``module`` (its
        trainable parameters), one optimizer and an optional scheduler; returns the engine, [its optimizer] and its
        scheduler. Relay's Trainer and Fabric build their engine in ``setup_optimizers`` instead."""
        if len(optimizers) != 1:
            raise ValueError(
                f"Currently only one optimizer is supported with DeepSpeed. Got {len(optimizers)} optimizers instead."
            )
        deepspeed = import_deepspeed()
        engine, optimizer, _, scheduler = deepspeed.initialize(
            model=module, model_parameters=[p for p in module.parameters() if p.requires_grad],
            optimizer=optimizers[0], lr_scheduler=scheduler, config=self.deepspeed_config(), dist_init_required=False,
        )
        self._configure_activation_checkpointing(deepspeed)
        return engine, [optimizer], scheduler

    def module_sharded_context(self) -> contextlib.AbstractContextManager:
        """Modules built inside are partitioned as they are made under ZeRO-3 (``deepspeed.zero.Init``)."""
        return import_deepspeed().zero.Init(enabled=self.zero_stage_3, remote_device=self.remote_device,
                                            config_dict_or_path=self.deepspeed_config())

    def module_init_context(self, empty_init: bool | None = None) -> contextlib.AbstractContextManager:
        """Lightning's: ``module_sharded_context`` (and, below ZeRO-3, the device and dtype of ``tensor_init_context``)."""
        if self.zero_stage_3 and empty_init is False:
            raise NotImplementedError(
                f"`{empty_init=}` is not a valid choice with `DeepSpeedStrategy` when ZeRO stage 3 is enabled."
            )
        stack = contextlib.ExitStack()
        if not self.zero_stage_3:
            stack.enter_context(self.tensor_init_context(empty_init=empty_init))
        stack.enter_context(self.module_sharded_context())
        return stack

    def setup_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Lightning's one-optimizer call: the engine is built around module and optimizer together."""
        raise NotImplementedError(
            f"The `{type(self).__name__}` does not support setting up the module and optimizer(s) independently."
            " Please call `setup_module_and_optimizers(model, [optimizer, ...])` to jointly set them up."
        )

    def deepspeed_config(self) -> dict[str, Any]:
        """DeepSpeed's config: ``config`` (the user's, or built from the arguments as Lightning does), with the
        Trainer's accumulation and clipping and the precision's fp16/bf16 section filled in. A user's own loop
        (Fabric) sets neither: DeepSpeed's config (its defaults: no accumulation, clipping at norm 1.0) decides, as
        under Lightning Fabric."""
        config = copy.deepcopy(self.config)
        if self._trainer_settings:
            agree(config, "gradient_accumulation_steps", self.accumulate_grad_batches,
                   "trainer.accumulate_grad_batches")
            agree(config, "gradient_clipping", float(self.gradient_clip_val or 0.0), "trainer.gradient_clip_val")
        config.setdefault("train_micro_batch_size_per_gpu", 1)  # Relay's loaders decide the batch
        config.setdefault("zero_allow_untested_optimizer", True)  # the user's torch optimizer
        config.setdefault("zero_force_ds_cpu_optimizer", False)
        config.setdefault("steps_per_print", 2**31 - 1)
        format_precision(config, getattr(self.precision, "name", "32-true"), {
            "loss_scale": self.loss_scale, "initial_scale_power": self.initial_scale_power,
            "loss_scale_window": self.loss_scale_window, "hysteresis": self.hysteresis,
            "min_loss_scale": self.min_loss_scale})
        return config

    def _configure_activation_checkpointing(self, deepspeed: Any) -> None:
        """``deepspeed.checkpointing`` set from the config's ``activation_checkpointing`` section, for a model that
        wraps its blocks in ``deepspeed.checkpointing.checkpoint``."""
        section = self.config.get("activation_checkpointing") or {}
        if any(section.values()):
            deepspeed.checkpointing.configure(
                mpu_=None, partition_activations=section.get("partition_activations"),
                contiguous_checkpointing=section.get("contiguous_memory_optimization"),
                checkpoint_in_cpu=section.get("cpu_checkpointing"), profile=section.get("profile"))

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

    def clip_gradients_norm(self, module: Any, optimizer: Any, max_norm: float, norm_type: float = 2.0,
                            error_if_nonfinite: bool = True) -> torch.Tensor:
        """A loop's own clipping (Lightning Fabric's call): DeepSpeed clips inside its step instead."""
        raise NotImplementedError(CLIPPING_REFUSED)

    def clip_gradients_value(self, module: Any, optimizer: Any, clip_val: float) -> None:
        raise NotImplementedError(CLIPPING_REFUSED)

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

    def save_checkpoint(self, path: Any, state: Any, storage_options: Any = None, filter: Any = None,
                        layout_keys: tuple[str, ...] = ()) -> None:
        """Two callers. Lightning code: ``save_checkpoint(path, state)``, where ``state`` holds the engine, which writes
        itself and the rest of ``state`` (``deepspeed_engine_state.py``). Relay's Trainer and Fabric:
        ``save_checkpoint(checkpoint, path, layout_keys=...)`` (``Strategy.save_checkpoint``'s order), with the
        states already collected: the engine's files and Relay's ``meta.pt`` (``deepspeed_checkpoint.py``)."""
        if isinstance(path, Mapping):  # Relay's order: a checkpoint first (a path never is a mapping)
            checkpoint, path = path, state
            if self.engine is None:
                return super().save_checkpoint(checkpoint, path, layout_keys)
            return save_deepspeed(checkpoint, path, self, layout_keys)
        save_engine_checkpoint(self, path, state, storage_options, filter)

    def load_checkpoint(self, path: str | os.PathLike | None = None, state: Any = None, strict: bool = True,
                        weights_only: bool | None = None, *, checkpoint_path: str | os.PathLike | None = None,
                        ) -> dict[str, Any]:
        """Lightning Fabric's call: restore ``state`` (a dict holding the engine) from a checkpoint the engine wrote,
        or a module / optimizer (or, with ``load_full_weights`` under ZeRO-3, a dict) from one plain checkpoint file.
        Lightning's Trainer-side call, ``load_checkpoint(checkpoint_path=...)``, restores this strategy's engine."""
        if checkpoint_path is not None:
            path = checkpoint_path
            if not (self.load_full_weights and self.zero_stage_3):
                check_checkpoint_directory(path)
                state = {"model": self.engine, "optimizer": getattr(self.engine, "optimizer", None)}
        if path is None:
            raise TypeError("DeepSpeedStrategy.load_checkpoint() needs the checkpoint's path.")
        if isinstance(state, (torch.nn.Module, torch.optim.Optimizer)) or (self.load_full_weights and self.zero_stage_3):
            return load_state_file(self, self.broadcast(path), state, strict, weights_only)
        return load_engine_checkpoint(path, state, strict)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"world_size={self.world_size}, stage={self.stage})")
