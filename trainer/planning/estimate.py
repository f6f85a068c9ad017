"""Per-rank memory of one training step, measured on fake tensors (no real memory for the model or activations).

How: the Module is copied with its parameters on the meta device (the user's module is not touched), its
``configure_model`` runs with a device mesh of the layout under a fake process group (so a tensor-parallel plan is
applied for real and each rank's shards have their real shapes), its tensors become fake, and one
``training_step``, backward and optimizer step run under ``FakeTensorMode`` on a batch of the real shape while a
dispatch mode counts the bytes of every storage that is allocated and freed (``tracker.LiveBytes``).

From that run: parameters, gradients and optimizer state are the bytes of this rank's tensors; activations are the
peak of everything else that is alive during forward and backward. Then the layout's data parallelism: DDP keeps
whole replicas plus its gradient buckets (one more copy of the gradients, unless ``gradient_as_bucket_view``); FSDP
keeps 1/dp_shard of parameters, gradients and optimizer state (each tensor padded to a multiple of the degree, as
FSDP2 does) plus the unsharded parameters and gradients of the units it gathers at a time. Pipeline and context
parallelism are scaled, not run: a stage holds 1/pp of the model and of the activations, a context shard 1/cp of the
activations.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_map

from plugins.strategies.parallelize import apply_activation_checkpointing, blocks_of
from trainer.model.optimizers import parse_optimizers
from trainer.planning.layout import Layout, layouts_for
from trainer.planning.tracker import LiveBytes, local_tensor, storage_bytes

GATHERED_UNITS = 2  # FSDP2 holds the unsharded parameters of the unit it runs and of the one it prefetches


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per rank (the busiest rank: rank 0 of the layout)."""

    layout: Layout
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int  # the peak of what forward and backward hold besides parameters and gradients
    strategy_buffers: int  # DDP's gradient buckets, FSDP's unsharded units
    peak: int  # the step's peak: parameters + optimizer state + the largest of (forward/backward, optimizer step)
    device_memory: int | None = None

    @property
    def fits(self) -> bool | None:
        return None if self.device_memory is None else self.peak <= self.device_memory

    def rows(self) -> list[tuple[str, int]]:
        return [("parameters", self.parameters), ("gradients", self.gradients),
                ("optimizer state", self.optimizer_state), ("activations (peak)", self.activations),
                ("strategy buffers", self.strategy_buffers), ("peak per rank", self.peak)]

    def __str__(self) -> str:
        lines = [f"layout: {self.layout.describe()} ({self.layout.world_size} process(es))"]
        lines += [f"  {name:<20} {format_bytes(value):>12}" for name, value in self.rows()]
        if self.device_memory is not None:
            verdict = "fits" if self.fits else "does NOT fit"
            lines.append(f"  {verdict} in {format_bytes(self.device_memory)} of device memory "
                         f"({100 * self.peak / self.device_memory:.0f}% used)")
        return "\n".join(lines)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def parse_memory(value: int | float | str) -> int:
    """``80GB`` / ``80GiB`` / ``512MiB`` / bytes: device memory (GB read as GiB, as GPU specifications mean)."""
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().upper().replace("IB", "B")
    for suffix, scale in (("TB", 1024**4), ("GB", 1024**3), ("MB", 1024**2), ("KB", 1024), ("B", 1)):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * scale)
    return int(float(text))


# --- the fake run ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _fake_world(layout: Layout) -> Iterator[Any]:
    """A device mesh of the layout's data and tensor degrees on a fake process group (rank 0), where a plan needs
    one (tp > 1); None otherwise. A process group already running is left alone (no mesh then)."""
    if layout.tp == 1:
        yield None
        return
    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError("Trainer.estimate / estimate_memory with tp > 1 runs before the processes start: call it "
                           "in the launching process (python -m trainer plan), not inside a distributed run.")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dims = [(n, getattr(layout, n)) for n in ("dp_replicate", "dp_shard", "tp")]
    size = math.prod(d for _, d in dims)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=size)
    try:
        yield init_device_mesh("cpu", tuple(d for _, d in dims), mesh_dim_names=tuple(n for n, _ in dims))
    finally:
        dist.destroy_process_group()


class _MeshOnly:
    """What ``Module.device_mesh`` reads while ``configure_model`` runs in the plan: a strategy with a mesh."""

    def __init__(self, mesh: Any) -> None:
        self.strategy = type("PlanStrategy", (), {"device_mesh": mesh})()


def meta_twin(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` whose parameters and buffers are on the meta device (no bytes copied)."""
    memo: dict[int, Any] = {}
    for param in module.parameters():
        memo[id(param)] = torch.nn.Parameter(torch.empty_like(param, device="meta"), requires_grad=param.requires_grad)
    for buffer in module.buffers():
        memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    trainer = getattr(module, "_trainer", None)
    if trainer is not None:
        memo[id(trainer)] = None
    return copy.deepcopy(module, memo)


def _configure(twin: torch.nn.Module, mesh: Any) -> None:
    configure = getattr(twin, "configure_model", None)
    if not callable(configure):
        return
    saved = getattr(twin, "_trainer", None)
    if mesh is not None:
        twin._trainer = _MeshOnly(mesh)  # the twin's own attribute, for ``device_mesh``; put back below
    try:
        configure()
    finally:
        if mesh is not None:
            twin._trainer = saved


def _loss(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        return out["loss"]
    raise ValueError("training_step must return a loss tensor (or a dict with 'loss') for the memory plan.")


def _unique_bytes(tensors: list[torch.Tensor]) -> int:
    seen: dict[int, int] = {}
    for tensor in tensors:
        local = local_tensor(tensor)
        seen.setdefault(local.untyped_storage().data_ptr() if not _is_fake_or_meta(local) else id(local),
                        storage_bytes(local))
    return sum(seen.values())


def _is_fake_or_meta(tensor: torch.Tensor) -> bool:
    return tensor.is_meta or type(tensor).__name__ == "FakeTensor"


def _units(twin: torch.nn.Module, wrap_policy: Any) -> list[list[torch.Tensor]]:
    """FSDP's units: every block the wrap policy selects, and the root with the rest."""
    units, claimed = [], set()
    for block in blocks_of(twin, wrap_policy):
        params = [p for p in block.parameters() if id(p) not in claimed]
        claimed.update(id(p) for p in params)
        units.append(params)
    units.append([p for p in twin.parameters() if id(p) not in claimed])
    return units


def _padded(tensor: torch.Tensor, shards: int) -> int:
    """A tensor's bytes on one FSDP2 shard: dim 0 split, padded to a multiple of ``shards``."""
    local = local_tensor(tensor)
    if local.dim() == 0:
        return local.element_size()
    rows = math.ceil(local.shape[0] / shards)
    return rows * (local.numel() // max(local.shape[0], 1)) * local.element_size()


def _apply_checkpointing(twin: torch.nn.Module) -> None:
    apply_activation_checkpointing(twin, True)


def estimate_memory(module: torch.nn.Module, batch: Any, layout: Layout | None = None,
                    device_memory: int | str | None = None, *, gradient_as_bucket_view: bool = False,
                    wrap_policy: Any = None) -> MemoryEstimate:
    """The per-rank memory of one training step of ``module`` on ``batch`` (one rank's batch, real tensors or any
    tensors of the real shape and dtype) in ``layout`` (default: one process); ``device_memory`` (bytes or
    ``"80GB"``) says whether it fits. The module itself is not changed or moved."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    layout = layout or Layout()
    memory = None if device_memory is None else parse_memory(device_memory)
    with _fake_world(layout) as mesh:
        twin = meta_twin(module)
        _configure(twin, mesh)
        if layout.activation_checkpointing:
            _apply_checkpointing(twin)
        fake = FakeTensorMode(allow_non_fake_inputs=True)
        with fake:
            twin.to_empty(device="cpu")
        params = [p for p in twin.parameters()]
        trainable = [p for p in params if p.requires_grad]
        optimizers, _ = parse_optimizers(twin.configure_optimizers())
        fake_batch = tree_map(lambda t: fake.from_tensor(t) if isinstance(t, torch.Tensor) else t, batch)
        step = LiveBytes()
        with fake, step:
            _loss(twin.training_step(fake_batch, 0)).backward()
        grads = [p.grad for p in trainable if p.grad is not None]
        grad_keys = {k for g in grads if (k := step.key_of(g)) is not None}
        update = LiveBytes()
        with fake, update:
            for optimizer in optimizers:
                optimizer.step()
        states = [t for o in optimizers for s in o.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        param_bytes, grad_bytes = _unique_bytes(params), _unique_bytes(grads)
        state_bytes = _unique_bytes(states)
        step_temporaries = max(update.peak - state_bytes, 0)
        activations = step.weighted_peak(dict.fromkeys(grad_keys, 0.0))

        shard = layout.dp_shard
        if shard > 1:
            share = sum(_padded(p, shard) for p in params)
            grad_share = sum(_padded(p, shard) for p in trainable if p.grad is not None)
            state_share = math.ceil(state_bytes / shard)
            units = sorted((_unique_bytes(u) for u in _units(twin, wrap_policy) if u), reverse=True)
            gathered = sum(units[:GATHERED_UNITS])
            # backward: a unit's unsharded gradients before their reduce-scatter, besides the gathered parameters
            buffers = gathered + (units[0] if units and grad_bytes else 0)
            fraction = grad_share / grad_bytes if grad_bytes else 0.0
            param_bytes, grad_bytes, state_bytes = share, grad_share, state_share
            step_temporaries = math.ceil(step_temporaries / shard)
        else:
            fraction = 1.0
            buffers = grad_bytes if layout.dp_replicate > 1 and not gradient_as_bucket_view else 0
        forward_backward = step.weighted_peak(dict.fromkeys(grad_keys, fraction))

    pp, cp = layout.pp, layout.cp
    if pp > 1:  # a stage holds about 1/pp of the model, and of the activations of its micro-batches
        param_bytes, grad_bytes, state_bytes, buffers = (math.ceil(x / pp) for x in
                                                         (param_bytes, grad_bytes, state_bytes, buffers))
    scale = pp * cp
    activations = math.ceil(activations / scale)
    forward_backward = math.ceil(forward_backward / scale)
    in_step = grad_bytes + step_temporaries  # the optimizer step: gradients and its temporaries
    working = forward_backward + (buffers if shard > 1 else 0)  # FSDP's gathered units come and go with the blocks
    constant = buffers if shard == 1 else 0  # DDP's buckets live as long as the model
    peak = param_bytes + state_bytes + constant + max(working, in_step)
    return MemoryEstimate(layout, param_bytes, grad_bytes, state_bytes, activations, buffers, peak, memory)


def fitting_layouts(module: torch.nn.Module, batch: Any, devices: int, device_memory: int | str,
                    max_tp: int = 8, **kwargs: Any) -> list[MemoryEstimate]:
    """Every layout of ``devices`` processes, estimated, the ones that fit first (least memory first).

    ``batch`` is one rank's batch; a layout whose tensor-parallel plan the module does not accept (a degree that does
    not divide its heads) is left out."""
    memory = parse_memory(device_memory)
    results = []
    cache: dict[tuple, MemoryEstimate] = {}
    for layout in layouts_for(devices, max_tp=max_tp):
        run_key = (layout.tp, layout.activation_checkpointing, layout.dp_shard, layout.dp_replicate > 1)
        try:
            base = cache.get(run_key)
            if base is None:
                base = cache[run_key] = estimate_memory(
                    module, batch, Layout(dp_replicate=min(layout.dp_replicate, 2), dp_shard=layout.dp_shard,
                                          tp=layout.tp, activation_checkpointing=layout.activation_checkpointing),
                    memory, **kwargs)
        except (ValueError, RuntimeError):
            continue
        results.append(_rescaled(base, layout, memory))
    return sorted(results, key=lambda e: (not e.fits, e.peak))


def _rescaled(base: MemoryEstimate, layout: Layout, memory: int) -> MemoryEstimate:
    """A run's estimate carried to a layout that differs only in pipeline and context degrees (scaled)."""
    pp, cp = layout.pp, layout.cp
    if pp == 1 and cp == 1:
        return MemoryEstimate(layout, base.parameters, base.gradients, base.optimizer_state, base.activations,
                              base.strategy_buffers, base.peak, memory)
    model = [math.ceil(x / pp) for x in (base.parameters, base.gradients, base.optimizer_state, base.strategy_buffers)]
    activations = math.ceil(base.activations / (pp * cp))
    rest = base.peak - base.parameters - base.optimizer_state - base.strategy_buffers
    peak = model[0] + model[2] + model[3] + math.ceil(rest / (pp * cp))
    return MemoryEstimate(layout, model[0], model[1], model[2], activations, model[3], peak, memory)
