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
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._pytree import tree_map

from plugins.strategies.parallelize import apply_activation_checkpointing, blocks_of
from plugins.transforms.activation_checkpointing import CheckpointSettings
from plugins.transforms.blocks import ModelTransforms, apply_model_transforms
from trainer.model.optimizers import parse_optimizers
from trainer.planning.layout import Layout, layouts_for
from trainer.planning.tracker import LiveBytes, local_tensor

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from trainer.utilities.types import STEP_OUTPUT

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
def _fake_world(layout: Layout) -> Iterator[DeviceMesh | None]:
    """A device mesh of the layout's degrees (``dp_replicate``, ``dp_shard``, ``tp``) on a fake process group (this
    process is rank 0 of it, and no collective moves data), where a tensor-parallel plan needs one; None otherwise.
    Inside a distributed run (a process group exists) it refuses: plan before the processes start."""
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

    def __init__(self, mesh: DeviceMesh | None) -> None:
        self.strategy = type("PlanStrategy", (), {"device_mesh": mesh})()


def meta_twin(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` whose parameters and buffers are on the meta device (no bytes copied)."""
    memo: dict[int, torch.Tensor | None] = {}
    for param in module.parameters():
        memo[id(param)] = torch.nn.Parameter(torch.empty_like(param, device="meta"), requires_grad=param.requires_grad)
    for buffer in module.buffers():
        memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    trainer = getattr(module, "_trainer", None)
    if trainer is not None:
        memo[id(trainer)] = None
    return copy.deepcopy(module, memo)


def _configure(twin: torch.nn.Module, mesh: DeviceMesh | None) -> None:
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


def _loss(out: STEP_OUTPUT) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        return out["loss"]
    raise ValueError("training_step must return a loss tensor (or a dict with 'loss') for the memory plan.")


def _unique_bytes(tensors: list[torch.Tensor]) -> int:
    """The bytes of the storages under ``tensors``, each counted once (views and tied weights share one)."""
    seen: dict[int, int] = {}
    storages = [local_tensor(t).untyped_storage() for t in tensors]  # kept alive: their ids stay unique
    for storage in storages:
        seen.setdefault(id(storage), storage.nbytes())
    return sum(seen.values())


def _units(twin: torch.nn.Module, wrap_policy: Any) -> list[list[torch.Tensor]]:
    """FSDP's units: every block the wrap policy selects, and the root with the rest."""
    units, claimed = [], set()
    for block in blocks_of(twin, wrap_policy):
        params = [p for p in block.parameters() if id(p) not in claimed]
        claimed.update(id(p) for p in params)
        units.append(params)
    units.append([p for p in twin.parameters() if id(p) not in claimed])
    return units


def _padded(shape: tuple[int, ...], element_size: int, shards: int) -> int:
    """A tensor's bytes on one FSDP2 shard: dim 0 split, padded to a multiple of ``shards``."""
    if not shape:
        return element_size
    return math.ceil(shape[0] / shards) * math.prod(shape[1:]) * element_size


@dataclass
class StepRun:
    """What one fake training step showed, before any data parallelism: this tensor-parallel rank's tensors."""

    shapes: list[tuple[tuple[int, ...], int, bool]]  # per parameter: local shape, element size, has a gradient
    param_bytes: int
    grad_bytes: int
    state_bytes: int
    step_temporaries: int  # the optimizer step's peak above its state
    units: list[int]  # FSDP units' parameter bytes, largest first
    timeline: LiveBytes  # forward and backward
    grad_keys: set[int]  # the timeline's gradient storages


def run_step(module: torch.nn.Module, batch: Any, tp: int = 1,
             activation_checkpointing: bool | CheckpointSettings = False, wrap_policy: Any = None) -> StepRun:
    """One ``training_step``, backward and optimizer step of a meta copy of ``module`` on fake tensors, with its
    tensor-parallel plan applied at degree ``tp`` (its ``configure_model`` sees a mesh of ``tp`` ranks).

    ``activation_checkpointing``: True recomputes every block; the Trainer's ``CheckpointSettings`` apply as the
    fit applies them (``selective`` keeps what its policy saves); ``budget`` mode is the compiler's work and is
    estimated as no checkpointing (an upper bound)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with _fake_world(Layout(tp=tp)) as mesh:
        twin = meta_twin(module)
        _configure(twin, mesh)
        if isinstance(activation_checkpointing, CheckpointSettings):
            if not activation_checkpointing.needs_compile:
                apply_model_transforms(twin, ModelTransforms(checkpointing=activation_checkpointing))
        elif activation_checkpointing:
            apply_activation_checkpointing(twin, True)
        fake = FakeTensorMode(allow_non_fake_inputs=True)
        with fake:
            twin.to_empty(device="cpu")
        params = list(twin.parameters())
        optimizers, _ = parse_optimizers(twin.configure_optimizers())
        fake_batch = tree_map(lambda t: fake.from_tensor(t) if isinstance(t, torch.Tensor) else t, batch)
        timeline = LiveBytes()
        with fake, timeline:
            _loss(twin.training_step(fake_batch, 0)).backward()
        grads = [p.grad for p in params if p.grad is not None]
        grad_keys = {k for g in grads if (k := timeline.key_of(g)) is not None}
        update = LiveBytes()
        with fake, update:
            for optimizer in optimizers:
                optimizer.step()
        states = [t for o in optimizers for s in o.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        state_bytes = _unique_bytes(states)
        shapes = [(tuple(local_tensor(p).shape), local_tensor(p).element_size(), p.grad is not None) for p in params]
        units = sorted((_unique_bytes(u) for u in _units(twin, wrap_policy) if u), reverse=True)
        return StepRun(shapes, _unique_bytes(params), _unique_bytes(grads), state_bytes,
                       max(update.peak - state_bytes, 0), units, timeline, grad_keys)


def per_rank(run: StepRun, layout: Layout, device_memory: int | str | None = None,
             gradient_as_bucket_view: bool = False) -> MemoryEstimate:
    """``run`` carried to ``layout``'s data, pipeline and context parallelism (its tensor parallelism ran)."""
    memory = None if device_memory is None else parse_memory(device_memory)
    params, grads, state, temporaries = run.param_bytes, run.grad_bytes, run.state_bytes, run.step_temporaries
    shard, sharded = layout.dp_shard, layout.sharded
    if sharded:  # FSDP: 1/shard of each tensor (padded), plus the unsharded units it gathers at a time
        share = sum(_padded(shape, size, shard) for shape, size, _ in run.shapes)
        grad_share = sum(_padded(shape, size, shard) for shape, size, has_grad in run.shapes if has_grad)
        # backward: a unit's unsharded gradients before their reduce-scatter, besides the gathered parameters
        buffers = sum(run.units[:GATHERED_UNITS]) + (run.units[0] if run.units and grads else 0)
        fraction = grad_share / grads if grads else 0.0
        params, grads, state = share, grad_share, math.ceil(state / shard)
        temporaries = math.ceil(temporaries / shard)
    else:  # DDP: whole replicas, and its gradient buckets
        fraction = 1.0
        buffers = grads if layout.dp_replicate > 1 and not gradient_as_bucket_view else 0
    # pipeline and context parallelism, scaled: a stage holds about 1/pp of the model and of its micro-batches'
    # activations; a context shard 1/cp of the activations (the gradients stay the stage's)
    pp, scale = layout.pp, layout.pp * layout.cp
    params, grads, state, buffers, temporaries = (math.ceil(x / pp) for x in (params, grads, state, buffers,
                                                                              temporaries))
    activations = math.ceil(run.timeline.weighted_peak(dict.fromkeys(run.grad_keys, 0.0), default=1 / scale))
    forward_backward = math.ceil(run.timeline.weighted_peak(dict.fromkeys(run.grad_keys, fraction / pp),
                                                            default=1 / scale))
    in_step = grads + temporaries  # the optimizer step: gradients and its temporaries
    working = forward_backward + (buffers if sharded else 0)  # FSDP's gathered units come and go with the blocks
    constant = 0 if sharded else buffers  # DDP's buckets live as long as the model
    peak = params + state + constant + max(working, in_step)
    return MemoryEstimate(layout, params, grads, state, activations, buffers, peak, memory)


def estimate_memory(module: torch.nn.Module, batch: Any, layout: Layout | None = None,
                    device_memory: int | str | None = None, *, gradient_as_bucket_view: bool = False,
                    wrap_policy: Any = None, checkpointing: CheckpointSettings | None = None) -> MemoryEstimate:
    """The per-rank memory of one training step of ``module`` on ``batch`` (one rank's batch, real tensors or any
    tensors of the real shape and dtype) in ``layout`` (default: one process); ``device_memory`` (bytes or
    ``"80GB"``) says whether it fits; ``checkpointing``: the Trainer's activation-checkpointing settings, applied
    as the fit applies them. The module itself is not changed or moved."""
    layout = layout or Layout()
    run = run_step(module, batch, layout.tp, checkpointing or layout.activation_checkpointing, wrap_policy)
    return per_rank(run, layout, device_memory, gradient_as_bucket_view)


def fitting_layouts(module: torch.nn.Module, batch: Any, devices: int, device_memory: int | str,
                    max_tp: int = 8, gradient_as_bucket_view: bool = False,
                    wrap_policy: Any = None) -> list[MemoryEstimate]:
    """Every layout of ``devices`` processes, estimated, the ones that fit first (least memory first).

    One fake step runs per tensor-parallel degree and activation-checkpointing choice; ``batch`` is one rank's batch.
    A tensor-parallel degree the module's plan refuses (one that does not divide its heads) is left out."""
    runs: dict[tuple[int, bool], StepRun | None] = {}
    results = []
    for layout in layouts_for(devices, max_tp=max_tp):
        key = (layout.tp, layout.activation_checkpointing)
        if key not in runs:
            try:
                runs[key] = run_step(module, batch, *key, wrap_policy=wrap_policy)
            except (ValueError, RuntimeError):
                runs[key] = None
        run = runs[key]
        if run is not None:
            results.append(per_rank(run, layout, device_memory, gradient_as_bucket_view))
    return sorted(results, key=lambda e: (not e.fits, e.peak))
