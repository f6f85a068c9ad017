"""The members Lightning's ``Strategy`` has that code written for Lightning reads or calls on ``trainer.strategy``:
the module and optimizers it holds (``lightning_module``, ``model``, ``optimizers``, ``lr_scheduler_configs``,
``precision_plugin``), reductions (``reduce``), state helpers (``lightning_module_state_dict``, ``optimizer_state``,
``remove_checkpoint``), the step calls (``training_step``...), its flags and its hooks.

MLflow's ``mlflow.pytorch.autolog`` reads ``trainer.strategy.lightning_module``, for one. The Trainer sets the
module and the optimizers here (``trainer.lightning_module`` and ``trainer.optimizers`` read them, as in
Lightning); Fabric leaves them unset. The hooks (``on_train_start``, ``on_train_batch_start``, ``on_exception``...)
are called by the Trainer where a strategy class overrides them, after the module's, as Lightning calls them;
``pre_backward``, ``post_backward``, ``post_training_step`` and ``setup_precision_plugin`` are there to be called by
a strategy's own code, the Trainer does not call them (its backward runs in ``trainer/loops/training_step.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from plugins.precision.base import Precision

# Lightning's strategy hooks the Trainer calls (only where a strategy overrides them)
STRATEGY_HOOKS = ("on_train_start", "on_validation_start", "on_test_start", "on_predict_start", "on_train_end",
                  "on_validation_end", "on_test_end", "on_predict_end", "on_train_batch_start")

_REDUCE_NAMES = {"mean": "mean", "avg": "mean", "sum": "sum", "max": "max", "min": "min"}


class LightningStrategyMembers:
    """Lightning's ``Strategy`` surface on Relay's strategies (mixed into ``plugins.strategies.base.Strategy``)."""

    module: torch.nn.Module | None
    precision: Precision
    lightning_module: torch.nn.Module | None  # the user's module, unwrapped; set by the Trainer
    optimizers: list[torch.optim.Optimizer]  # the fit's optimizers, as the strategy set them up (Trainer's)
    lr_scheduler_configs: list[Any]
    launcher: Any = None  # a strategy that starts processes itself has one
    lightning_restore_optimizer = True  # the Trainer restores optimizer and scheduler states
    handles_gradient_accumulation = False  # the loop accumulates (an engine that does it itself says True)

    @property
    def model(self) -> torch.nn.Module | None:
        """What the strategy set up for the steps (``trainer.model``), else the module it was given."""
        return self.module if self.module is not None else self.lightning_module

    @model.setter
    def model(self, model: torch.nn.Module | None) -> None:
        self.module = model

    @property
    def precision_plugin(self) -> Precision:
        """Lightning's name for ``precision``."""
        return self.precision

    @precision_plugin.setter
    def precision_plugin(self, precision: Precision) -> None:
        self.precision = precision

    @property
    def strategy_name(self) -> str:
        return getattr(self, "name", "") or type(self).__name__

    # --- reductions and state ---------------------------------------------------------------------
    def reduce(self, tensor: Any, group: Any = None, reduce_op: Any = "mean") -> Any:
        """``tensor`` reduced over the processes (``group``: a process group, None: all); anything else as it is.
        ``reduce_op``: ``"mean"``/``"avg"``, ``"sum"``, ``"max"``, ``"min"`` or a ``torch.distributed.ReduceOp``."""
        if not isinstance(tensor, torch.Tensor):
            return tensor
        name = getattr(reduce_op, "name", None) or str(reduce_op)  # ReduceOp.SUM -> "SUM"
        op = _REDUCE_NAMES.get(name.lower())
        if op is None:
            raise ValueError(f"{type(self).__name__}.reduce(reduce_op={reduce_op!r}) is not supported; use one of "
                             f"{', '.join(_REDUCE_NAMES)} (or torch.distributed.ReduceOp.SUM/AVG/MAX/MIN).")
        if group is None:
            return self.all_reduce(tensor, op)  # type: ignore[attr-defined]
        from plugins.strategies.gather import all_reduce_in_group  # local import: only a given group needs it

        return all_reduce_in_group(tensor, op, group)

    def lightning_module_state_dict(self) -> dict[str, Any]:
        """The module's state in this strategy's layout (a sharded strategy's shards)."""
        return self.module_state_dict(self._given_module())  # type: ignore[attr-defined]

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The optimizer's state as a checkpoint stores it (its torch optimizer under a ``LightningOptimizer``)."""
        return self.optimizer_state_dict(getattr(optimizer, "optimizer", optimizer))  # type: ignore[attr-defined]

    def remove_checkpoint(self, filepath: Any) -> None:
        """Delete a checkpoint through this strategy's checkpoint I/O, on rank 0."""
        if self.is_global_zero:  # type: ignore[attr-defined]
            self.checkpoint_io.remove_checkpoint(filepath)  # type: ignore[attr-defined]

    def model_to_device(self) -> None:
        """Move the module to this process's device."""
        if self.model is not None:
            self.model.to(self.root_device)  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def model_sharded_context(self) -> Generator[None, None, None]:
        """Lightning's context for building a model sharded at once; Relay's strategies shard in ``setup_module``."""
        yield

    def process_dataloader(self, dataloader: object) -> object:
        return dataloader

    # --- the steps, called on the module as the Trainer calls them ------------------------------------
    def _step(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self.precision.forward_context():
            return getattr(self._given_module(), name)(*args, **kwargs)

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._step("training_step", *args, **kwargs)

    def validation_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._step("validation_step", *args, **kwargs)

    def test_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._step("test_step", *args, **kwargs)

    def predict_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._step("predict_step", *args, **kwargs)

    def _given_module(self) -> torch.nn.Module:
        module = self.lightning_module if self.lightning_module is not None else self.module
        if module is None:
            raise RuntimeError(f"{type(self).__name__} holds no module yet: the Trainer gives it one when a fit, "
                               "validate, test or predict call starts.")
        return module

    # --- hooks: Lightning's no-ops, for a strategy class to override -----------------------------------
    def setup_precision_plugin(self) -> None: ...

    def pre_backward(self, closure_loss: torch.Tensor) -> None: ...

    def post_backward(self, closure_loss: torch.Tensor) -> None: ...

    def post_training_step(self) -> None: ...

    def on_train_start(self) -> None: ...

    def on_validation_start(self) -> None: ...

    def on_test_start(self) -> None: ...

    def on_predict_start(self) -> None: ...

    def on_train_end(self) -> None: ...

    def on_validation_end(self) -> None: ...

    def on_test_end(self) -> None: ...

    def on_predict_end(self) -> None: ...

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None: ...

    def on_exception(self, exception: BaseException) -> None: ...

    @classmethod
    def register_strategies(cls, strategy_registry: Any) -> None:
        """Lightning's registration hook; Relay's registry lists its strategies in ``plugins/registry.py``."""
