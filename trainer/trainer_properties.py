"""Lightning's remaining public ``Trainer`` members, each read from the object that owns what it reports.

Placement comes from the strategy, run state from ``trainer.state``, batch counts from the fit loop, callbacks
from ``trainer.callbacks``, signals from the preemption handler (``trainer/checkpointing/preemption.py``), and the loaders
from the record ``trainer/stage/run.py`` keeps of the loaders the current (or last) Trainer call uses.
Kept out of ``trainer/trainer.py`` so that file stays about running the loops.
"""

from __future__ import annotations

import math
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from trainer.model.overrides import subclass_overrides
from trainer.module import Module
from trainer.checkpointing.preemption import received
from trainer.states import TrainerStatus
from trainer.utilities.lazy import instances_of

if TYPE_CHECKING:
    import torch

    from trainer.callbacks.early_stopping import EarlyStopping
    from trainer.utilities.types import EVAL_DATALOADERS, TRAIN_DATALOADERS


class TrainerProperties:
    """Mixed into ``Trainer``; every member reads state the Trainer already has, none keeps its own."""

    # --- placement -------------------------------------------------------------------------------------
    @property
    def device_ids(self) -> list[int]:
        """The device indices this node's processes use (one process: the index of its device; CPU: 0..n-1)."""
        ids = list(self.strategy.device_ids)
        if len(ids) > 1:
            return ids
        index = self.strategy.root_device.index  # a strategy given its own device (e.g. "cuda:1") says which
        return [index if index is not None else 0]

    @property
    def num_devices(self) -> int:
        """Devices the Trainer uses per node."""
        return len(self.device_ids)

    @property
    def node_rank(self) -> int:
        return getattr(self.strategy, "node_rank", 0)

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        """``num_replicas`` and ``rank`` the loaders are sharded with; None for a single-process strategy."""
        strategy = self.strategy
        parallel = sys.modules.get("plugins.strategies.parallel")  # imported by every multi-process strategy
        if strategy.world_size == 1 and (parallel is None or not isinstance(strategy, parallel.ParallelStrategy)):
            return None
        return dict(strategy.distributed_sampler_kwargs)

    @contextmanager
    def init_module(self, empty_init: bool | None = None) -> Iterator[None]:
        """Modules built inside are made on the strategy's root device and, for the ``"-true"`` precisions, in
        the precision's dtype, so they are not built in fp32 on the CPU and then copied. ``empty_init=True``
        leaves their weights uninitialised (for a model about to load a checkpoint); with FSDP it builds the
        model on the meta device, materialised shard by shard when the fit sets it up."""
        with self.strategy.tensor_init_context(empty_init=empty_init):
            yield

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` on the first process of each node (local rank 0), as Lightning's ``Trainer.print``."""
        if self.local_rank == 0:
            print(*args, **kwargs)

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The precision's ``torch.amp.GradScaler`` (fp16 mixed precision on a GPU), else None."""
        return getattr(self.precision_plugin, "scaler", None)

    # --- run state ---------------------------------------------------------------------------------------
    @property
    def interrupted(self) -> bool:
        return self.state.status == TrainerStatus.INTERRUPTED

    @property
    def evaluating(self) -> bool:
        """Validation, testing or the sanity check is running."""
        stage = self.state.stage
        return stage is not None and stage.evaluating

    @property
    def received_sigterm(self) -> bool:
        """SIGTERM arrived during this Trainer call's fit (Relay then checkpoints after the step and exits)."""
        return received(self, signal.SIGTERM)

    @property
    def enable_validation(self) -> bool:
        """The fit validates: there are validation loaders to ask for, a ``validation_step`` and batches allowed."""
        module = self.lightning_module
        if module is None or not self.fit_loop.val_source or self.limit_val_batches == 0:
            return False
        return subclass_overrides("validation_step", module, Module)

    @property
    def num_sanity_val_batches(self) -> list[int | float]:
        """Validation batches per loader the fit's sanity check runs (``[]`` until the fit loads them)."""
        steps = math.inf if self.num_sanity_val_steps == -1 else self.num_sanity_val_steps
        return [min(steps, n) for n in self.fit_loop.val_limits]

    @property
    def val_check_batch(self) -> int | float | None:
        """Validate after every this many training batches (inf: when an unsized loader ends); None before fit."""
        return getattr(self.fit_loop, "val_check_batch", None)

    @val_check_batch.setter
    def val_check_batch(self, value: int | float) -> None:
        self.fit_loop.val_check_batch = value

    # --- callbacks -------------------------------------------------------------------------------------
    @property
    def early_stopping_callbacks(self) -> list[EarlyStopping]:
        return instances_of(self.callbacks, "trainer.callbacks.early_stopping", "EarlyStopping")

    @property
    def early_stopping_callback(self) -> EarlyStopping | None:
        callbacks = self.early_stopping_callbacks
        return callbacks[0] if callbacks else None

    # --- the loaders of the current (or last) Trainer call -----------------------------------------------
    # As Lightning shows them: on one process the loaders given (the loops iterate copies with the Trainer's
    # resumable sampler); with several, and for prediction or overfit_batches, the rebuilt ones (a sharded or
    # in-order sampler). One loader, or a list when a list was given; None before they are loaded or in another call.
    @property
    def train_dataloader(self) -> TRAIN_DATALOADERS | None:
        return self.stage_run.loaders.get("train")

    @property
    def val_dataloaders(self) -> EVAL_DATALOADERS | None:
        """The fit's validation loaders (after the sanity check loads them), or ``validate``'s."""
        return self.stage_run.loaders.get("val")

    @property
    def test_dataloaders(self) -> EVAL_DATALOADERS | None:
        return self.stage_run.loaders.get("test")

    @property
    def predict_dataloaders(self) -> EVAL_DATALOADERS | None:
        return self.stage_run.loaders.get("predict")
