"""An in-memory copy of the training state on the CPU, to roll back to without touching the disk.

What a checkpoint holds for continuing exactly, less what a rollback keeps going (the loop's data position and
the callbacks' states): every rank's own parameters and buffers (a sharded one: its local shard), optimizer states
and hyperparameters, the schedulers, the precision plugin's scaler, the RNG states and the global step. The copies
go into CPU buffers kept from one snapshot to the next (pinned for a CUDA model, copied without waiting for the
device: the copy is queued on the stream, so it reads the weights as they are at the call), and are written back in
place, so the parameter and optimizer-state objects a strategy wrapped (DDP's buckets, FSDP's ``DTensor`` shards)
stay the same objects.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch

from trainer.checkpointing.files import restore_rng_states, rng_states

if TYPE_CHECKING:
    from trainer.trainer import Trainer


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """The storage this rank owns (a ``DTensor``'s local shard, itself under no_grad)."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


class _Buffers:
    """CPU copies of device tensors, reused from one snapshot to the next (keyed by position)."""

    def __init__(self) -> None:
        self.copies: list[torch.Tensor] = []
        self.used = 0
        self.device_copies = False

    def start(self) -> None:
        self.used = 0

    def copy(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = _local(tensor.detach())
        i, self.used = self.used, self.used + 1
        if i < len(self.copies) and self.copies[i].shape == tensor.shape and self.copies[i].dtype == tensor.dtype:
            out = self.copies[i]
        else:
            pin = tensor.is_cuda and torch.cuda.is_available()
            out = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
            if i < len(self.copies):
                self.copies[i] = out
            else:
                self.copies.append(out)
        if tensor.device.type != "cpu":
            self.device_copies = True
        out.copy_(tensor, non_blocking=tensor.device.type == "cuda")
        return out


class TrainingSnapshot:
    """``take(trainer)`` copies the state; ``restore(trainer)`` writes it back; ``step`` is the global step it holds."""

    def __init__(self) -> None:
        self.buffers = _Buffers()
        self.step = -1
        self.position: tuple[int, int, int] = (0, 0, 0)  # (epoch, batch in it, batches over all epochs)
        self.module: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.optimizers: list[tuple[list[dict[str, Any]], list[dict[str, Any] | None]]] = []
        self.schedulers: list[dict[str, Any]] = []
        self.precision: dict[str, Any] = {}
        self.rng: dict[str, Any] = {}
        self.nbytes = 0

    @property
    def taken(self) -> bool:
        return self.step >= 0

    def take(self, trainer: Any, position: tuple[int, int, int]) -> None:
        buffers = self.buffers
        buffers.start()
        module = trainer.lightning_module
        with torch.no_grad():
            self.module = [(t, buffers.copy(t)) for t in (*module.parameters(), *module.buffers())]
            self.optimizers = [self._optimizer(opt) for opt in trainer.optimizers]
        self.schedulers = [copy.deepcopy(c.scheduler.state_dict()) for c in trainer.lr_scheduler_configs]
        self.precision = copy.deepcopy(trainer.strategy.precision.state_dict())
        self.rng = rng_states()
        self.step = trainer.global_step
        self.position = position
        self.nbytes = sum(c.numel() * c.element_size() for c in buffers.copies[: buffers.used])

    def _optimizer(self, optimizer: torch.optim.Optimizer) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
        groups = [{k: (v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v))
                   for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        states: list[dict[str, Any] | None] = []
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = optimizer.state.get(param)
                states.append(None if not state else {
                    k: (self.buffers.copy(v) if isinstance(v, torch.Tensor) else copy.deepcopy(v))
                    for k, v in state.items()})
        return groups, states

    def restore(self, trainer: Trainer) -> None:
        if self.buffers.device_copies and torch.cuda.is_available():
            torch.cuda.synchronize()  # the snapshot's copies have landed
        with torch.no_grad():
            for live, saved in self.module:
                _local(live).copy_(saved)
            for optimizer, (groups, states) in zip(trainer.optimizers, self.optimizers):
                self._restore_optimizer(optimizer, groups, states)
        for config, state in zip(trainer.lr_scheduler_configs, self.schedulers):
            config.scheduler.load_state_dict(copy.deepcopy(state))
        trainer.strategy.precision.load_state_dict(copy.deepcopy(self.precision))
        restore_rng_states(self.rng)
        trainer.global_step = self.step

    @staticmethod
    def _restore_optimizer(optimizer: torch.optim.Optimizer, groups: list[dict[str, Any]],
                           states: list[dict[str, Any] | None]) -> None:
        for group, saved in zip(optimizer.param_groups, groups):
            for k, v in saved.items():
                if isinstance(v, torch.Tensor) and isinstance(group.get(k), torch.Tensor):
                    group[k].copy_(v)
                else:
                    group[k] = copy.deepcopy(v)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for param, saved_state in zip(params, states):
            if saved_state is None:  # no state yet at the snapshot (lazily made at the first step)
                optimizer.state.pop(param, None)
                continue
            state = optimizer.state[param]
            for k, v in saved_state.items():
                current = state.get(k)
                if isinstance(v, torch.Tensor) and isinstance(current, torch.Tensor) and _local(current).shape == v.shape:
                    _local(current).copy_(v)
                elif isinstance(v, torch.Tensor):  # a state a step replaced (not kept in place): a new tensor
                    device = _local(param).device if v.dim() else v.device  # Adam's `step` stays on the CPU
                    state[k] = v.to(device, copy=True)
                else:
                    state[k] = copy.deepcopy(v)
            for k in [k for k in state if k not in saved_state]:
                del state[k]
        optimizer.zero_grad(set_to_none=True)
