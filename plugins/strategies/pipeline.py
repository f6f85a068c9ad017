"""Pipeline parallelism on ``torch.distributed.pipelining``, composed with DDP/FSDP and tensor parallel on one mesh.

The Module is cut into stages along its blocks (the contract is in ``pipeline_split``); each rank runs one
stage (``gpipe``, ``1f1b``) or several (``interleaved_1f1b``, ``interleaved_zb``, ``zbv``). A training step
is the schedule's forward and backward over ``n_microbatches`` micro-batches (``forward_backward``), so the
Trainer still sees "a step that returns a loss". Validation, test and predict run the forward-only schedule
and hand the last stage's output to every rank of the pipeline, so ``*_step`` and ``self.log`` work unchanged.

Layout: ``pp`` stages x ``dp_replicate`` (DDP inside each stage) or ``dp_shard`` (FSDP2 inside each stage,
hybrid with ``dp_replicate``) x ``tp`` (the Module's tensor-parallel plan), e.g.
``strategy=pipeline trainer.devices=4 strategy.pp=2 strategy.dp_shard=2``.

Checkpoints are sharded directories (DCP): each rank writes its stage's tensors, rank 0 the names of all of
them, so any layout (one process included) resumes from them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch

from plugins.strategies import pipeline_split as split
from plugins.strategies.fsdp import grads_by_mesh, total_grad_norm
from plugins.strategies.mesh import DIMS, MeshLayout, submesh
from plugins.strategies.parallel import ParallelStrategy
from plugins.strategies.parallelize import apply_activation_checkpointing, apply_ddp, apply_fsdp
from plugins.strategies.pipeline_state import load_stage_module_state, load_stage_optimizer_state, merge_stage_meta
from plugins.strategies.sharded_checkpoint import save_sharded
from plugins.strategies.state_layout import optimizer_state_by_name

# name -> (class in torch.distributed.pipelining, stages per rank: "single" 1, "looped" >= 2, "v" exactly 2)
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", "single"),
    "1f1b": ("Schedule1F1B", "single"),
    "interleaved_1f1b": ("ScheduleInterleaved1F1B", "looped"),
    "interleaved_zb": ("ScheduleInterleavedZeroBubble", "looped"),
    "zbv": ("ScheduleZBVZeroBubble", "v"),
}


class PipelineStrategy(ParallelStrategy):
    """``pp`` pipeline stages (x data / tensor parallel degrees) running a ``torch.distributed.pipelining`` schedule."""

    name = "pipeline"
    # the module, cut into stages over the processes: it stays so between calls (as Lightning's model-parallel strategy)
    module_stays_on_device = True
    layout_preset = MeshLayout(dp_replicate=1, dp_shard=1, tp=1, pp=-1)
    layout_dims = tuple(d for d in DIMS if d != "cp")  # a schedule's micro-batches under ring attention: not yet

    def __init__(
        self,
        schedule: str = "1f1b",
        n_microbatches: int | None = None,
        stages_per_rank: int | None = None,
        split_points: list[str] | None = None,
        activation_checkpointing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        schedule = str(schedule).lower()
        if schedule not in SCHEDULES:
            raise ValueError(f"PipelineStrategy(schedule={schedule!r}) is not known; use one of "
                             f"{', '.join(SCHEDULES)}, e.g. strategy.schedule=1f1b.")
        kind = SCHEDULES[schedule][1]
        default_per_rank = 1 if kind == "single" else 2
        per_rank = default_per_rank if stages_per_rank is None else stages_per_rank
        if isinstance(per_rank, bool) or not isinstance(per_rank, int) or per_rank < 1:
            raise ValueError(f"PipelineStrategy(stages_per_rank={stages_per_rank!r}) must be an int >= 1.")
        if (kind == "single" and per_rank != 1) or (kind == "looped" and per_rank < 2) or (kind == "v" and per_rank != 2):
            need = {"single": "1", "looped": "2 or more", "v": "2"}[kind]
            raise ValueError(f"PipelineStrategy(schedule={schedule!r}) runs {need} stage(s) per rank, not "
                             f"stages_per_rank={per_rank}; leave stages_per_rank unset, or pick "
                             f"schedule=interleaved_1f1b for several stages per rank.")
        if n_microbatches is not None and (isinstance(n_microbatches, bool) or not isinstance(n_microbatches, int)
                                           or n_microbatches < 1):
            raise ValueError(f"PipelineStrategy(n_microbatches={n_microbatches!r}) must be an int >= 1 "
                             "(e.g. strategy.n_microbatches=4) or unset (twice the number of stages per pipeline).")
        if split_points is not None and (isinstance(split_points, str) or not all(isinstance(p, str)
                                                                                  for p in split_points)):
            raise ValueError(f"PipelineStrategy(split_points={split_points!r}) must be a list of block names, e.g. "
                             "strategy.split_points=[blocks.2].")
        self.schedule = schedule
        self.stages_per_rank = per_rank
        self._n_microbatches = n_microbatches
        self.split_points = list(split_points) if split_points else None
        self.activation_checkpointing = bool(activation_checkpointing)
        self.stage_indices: list[int] = []
        self._stage_modules: list[torch.nn.Module] = []
        self._pipelined: Any = None
        self._schedules: dict[Any, Any] = {}
        self.stage_blocks: list[list[str]] = []
        self._step: dict[str, Any] = {}

    @property
    def n_stages(self) -> int:
        return self.layout.pp * self.stages_per_rank

    @property
    def n_microbatches(self) -> int:
        return self._n_microbatches or 2 * self.n_stages

    # --- the module ------------------------------------------------------------------------------
    def check_module(self, module: torch.nn.Module) -> None:
        """The stage split of a Module whose blocks exist already (one built in ``configure_model`` is checked by
        the workers): too few blocks for the stages, or split points that name no block."""
        try:
            pipelined = split.find_pipeline(module)
        except ValueError:
            return  # the contract may be met once configure_model has run; setup_module says what is missing
        split.stage_starts(pipelined, self.n_stages, self.split_points)

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        """Cut, then tensor parallel (already applied by configure_model), checkpointing, data parallel."""
        self._check_precision()
        module = self.precision.convert_module(module).to(self.root_device)
        if self._pipelined is None or self._pipelined.parent is not _get(module, self._pipelined.parent_path):
            self._cut(module)
        self.module = module
        self._schedules = {}
        return module

    def _cut(self, module: torch.nn.Module) -> None:
        pipelined = split.find_pipeline(module)
        layout = self.layout
        starts = split.stage_starts(pipelined, self.n_stages, self.split_points)
        stages = split.stage_blocks(pipelined, starts)
        pp_rank = layout.coordinates(self.global_rank)["pp"]
        self.stage_indices = split.local_stages(SCHEDULES[self.schedule][1], pp_rank, layout.pp, self.stages_per_rank)
        self.stage_blocks = stages
        split.prune(pipelined, stages, self.stage_indices)
        views = [split.stage_module(pipelined, stages, s) for s in self.stage_indices]
        if self.activation_checkpointing and getattr(self.model_transforms, "checkpointing", None):
            raise ValueError("PipelineStrategy(activation_checkpointing=True) and the Trainer's "
                             "activation_checkpointing=... both ask for activation checkpointing; keep one.")
        for view in views:
            apply_activation_checkpointing(view, self.activation_checkpointing)
            self.apply_model_transforms(view)  # per stage, before its FSDP/DDP wrapper
        dp_mesh = submesh(self.device_mesh, "dp_replicate", "dp_shard")
        if layout.dp_shard > 1:  # FSDP inside each stage (hybrid when dp_replicate > 1)
            kwargs = {"mesh": dp_mesh}
            if getattr(self.precision, "name", "").endswith("-mixed"):
                from torch.distributed.fsdp import MixedPrecisionPolicy

                kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=self.precision.dtype,
                                                           reduce_dtype=torch.float32)
            for view in views:
                apply_fsdp(view, [view], None, **kwargs)
        elif layout.dp_replicate > 1:  # DDP inside each stage
            group = submesh(self.device_mesh, "dp_replicate").get_group()
            views = [apply_ddp(view, group, self.root_device) for view in views]
        self._stage_modules = views
        self._pipelined = pipelined

    def _check_backend(self) -> None:
        super()._check_backend()
        pp = self._layout_request().resolve(self.world_size).pp
        if pp < 2:
            raise ValueError(f"strategy=pipeline with pp={pp} ({self.world_size} process(es)) has nothing to pipeline: "
                             "use 2 or more stages' processes (trainer.devices=2, or strategy.pp=2 with more devices), "
                             "or strategy=single_device / ddp / fsdp.")

    def _check_precision(self) -> None:
        if getattr(self.precision, "scaler", None) is not None and self.layout.dp_shard > 1:
            raise ValueError("strategy=pipeline with dp_shard > 1 and precision=16-mixed: FSDP has no gradient scaler "
                             "here; use precision=bf16-mixed.")

    @property
    def _pp_group(self) -> Any:
        return self.device_mesh["pp"].get_group() if self.layout.pp > 1 else None

    def _build_schedule(self, n_microbatches: int, loss_fn: Callable | None) -> Any:
        import torch.distributed.pipelining as pipelining

        group = self._pp_group
        stages = [
            pipelining.PipelineStage(view, index, self.n_stages, self.root_device, group=group)
            for view, index in zip(self._stage_modules, self.stage_indices)
        ]
        cls = getattr(pipelining, SCHEDULES[self.schedule][0])
        first = stages[0] if SCHEDULES[self.schedule][1] == "single" else stages
        return cls(first, n_microbatches, loss_fn=loss_fn, scale_grads=False)

    def _schedule(self, key: Any, n_microbatches: int, loss_fn: Callable | None) -> Any:
        """One schedule (with its stages) per batch shape: stages learn shapes once, at their first step."""
        if key not in self._schedules:
            self._schedules[key] = self._build_schedule(n_microbatches, loss_fn)
        return self._schedules[key]

    @property
    def _has_first(self) -> bool:
        return 0 in self.stage_indices

    @property
    def _has_last(self) -> bool:
        return self.n_stages - 1 in self.stage_indices

    def _last_stage_rank(self) -> int:
        """The global rank holding the last stage in this rank's pipeline."""
        import torch.distributed as dist

        kind = SCHEDULES[self.schedule][1]
        group_rank = 0 if kind == "v" else self.layout.pp - 1
        return dist.get_global_rank(self._pp_group, group_rank)

    # --- one training step -----------------------------------------------------------------------
    def forward_backward(self, step_fn: Callable[[Any, int], Any], batch: Any, batch_idx: int,
                         backward: Any) -> torch.Tensor | None:
        """The schedule instead of ``training_step`` + backward; gradients zeroed first, the loss reported after."""
        backward.zero_grad()
        module = self.module
        inputs, target = split.split_batch(module, batch)
        m = self._microbatches_for(inputs, train=True)
        # micro-batch means -> the batch mean, over the accumulation window
        self._step = {"scale": float(m * backward.accumulate), "raw": [], "calls": 0}
        schedule = self._schedule(("train", tuple(inputs.shape), m), m, self._loss_fn)
        args = (inputs,) if self._has_first else ()
        with self.precision.forward_context(), _recording_logs(module, self._has_last, self._step, m) as logs:
            schedule.step(*args, target=target if self._has_last else None)
        raw = self._step["raw"][-m:]  # a schedule's first step also calls the loss once to learn shapes
        loss = torch.stack(raw).mean() if raw else torch.zeros((), device=self.root_device)
        loss, logged = self._from_last_stage(loss, logs)
        _replay_logs(module, logged)
        return backward.finished({"loss": loss})

    def _loss_fn(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The last stage's loss of one micro-batch, scaled so the schedule's gradients are the step's."""
        step = self._step
        step["calls"] += 1
        loss = self.module.pipeline_loss(output, target)
        step["raw"].append(loss.detach())
        loss = loss / step["scale"]
        scaler = getattr(self.precision, "scaler", None)
        return scaler.scale(loss) if scaler is not None else loss

    def _microbatches_for(self, inputs: Any, train: bool) -> int:
        size = inputs.shape[0] if isinstance(inputs, torch.Tensor) else None
        m = self.n_microbatches
        if size is None:
            raise ValueError("strategy=pipeline: the inputs must be one tensor (batch first); return them from "
                             "pipeline_inputs(batch) -> (inputs, target).")
        if size % m == 0:
            return m
        if train:
            raise ValueError(f"strategy=pipeline: a batch of {size} does not split into n_microbatches={m} equal "
                             f"micro-batches; use a batch size that is a multiple of {m} (and drop_last=True for "
                             f"the last batch), or strategy.n_microbatches={math.gcd(size, m)}.")
        return math.gcd(size, m)  # evaluation: the largest count that still splits the batch evenly

    def _from_last_stage(self, loss: torch.Tensor, logs: list) -> tuple[torch.Tensor, list]:
        """The loss and the logged values, from the last stage to every rank of its pipeline."""
        if self.layout.pp == 1:
            return loss, logs
        import torch.distributed as dist

        box = [(float(loss), logs) if self._has_last else None]
        dist.broadcast_object_list(box, src=self._last_stage_rank(), group=self._pp_group)
        value, logged = box[0]
        return torch.tensor(value, device=self.root_device), logged

    def no_backward_sync(self, enabled: bool) -> contextlib.AbstractContextManager:
        """The stages reduce gradients at the end of each schedule step: accumulation stays correct (the
        reductions are linear), at the cost of one reduction per accumulated batch."""
        return contextlib.nullcontext()

    def clip_gradients_by_norm(self, params: list[torch.Tensor], max_norm: float) -> None:
        """The norm over every stage: each rank's share (shards and TP included), summed over the pipeline."""
        groups = grads_by_mesh(params)
        local = total_grad_norm(groups).to(self._collective_device)
        if self.layout.pp > 1:
            import torch.distributed as dist

            squared = local.pow(2)
            dist.all_reduce(squared, group=self._pp_group)
            local = squared.sqrt()
        total = local.to(self.root_device)
        for group in groups.values():
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)

    # --- evaluation ------------------------------------------------------------------------------
    def evaluation_context(self) -> contextlib.AbstractContextManager:
        return torch.no_grad()

    def step_function(self, module: torch.nn.Module, name: str) -> Callable[..., Any]:
        """Evaluation steps run as written; the pipelined model's forward becomes the forward-only schedule."""
        fn = super().step_function(module, name)
        if name == "training_step":
            if not getattr(module, "automatic_optimization", True):
                raise ValueError(f"strategy=pipeline: {type(module).__name__} sets automatic_optimization = False, but "
                                 "a pipeline schedule runs forward and backward itself; use automatic optimization "
                                 "(remove that line) or another strategy.")
            return fn
        parent = self._pipelined.parent

        def run(*args: Any, **kwargs: Any) -> Any:
            parent.forward = self._evaluate  # an instance attribute: only this call, only this module
            try:
                return fn(*args, **kwargs)
            finally:
                del parent.forward

        return run

    def _evaluate(self, inputs: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        m = self._microbatches_for(inputs, train=False)
        schedule = self._schedule(("eval", tuple(inputs.shape), m), m, None)
        args = (inputs,) if self._has_first else ()
        with self.precision.forward_context():
            output = schedule.eval(*args)
        if self.layout.pp == 1:
            return output
        box = [output.cpu() if self._has_last else None]
        dist.broadcast_object_list(box, src=self._last_stage_rank(), group=self._pp_group)
        return box[0].to(self.root_device)

    # --- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: dict[str, Any], path: str, layout_keys: tuple[str, ...] = ()) -> None:
        """A sharded directory: every rank writes its stage; rank 0's index names every stage's tensors."""
        def merge(meta: dict[str, Any]) -> dict[str, Any]:
            return merge_stage_meta(self.all_gather_object({k: meta[k] for k in layout_keys if k in meta}), meta)

        save_sharded(checkpoint, path, self, layout_keys, merge_meta=merge)

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return optimizer_state_by_name(optimizer.state_dict(), optimizer, self._state_module())

    def load_module_state_dict(self, module: torch.nn.Module, state: Any, strict: bool = True) -> None:
        load_stage_module_state(module, state, strict)

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer, state: Any) -> None:
        load_stage_optimizer_state(optimizer, state, self._state_module())

    def teardown(self) -> None:
        self._schedules = {}
        super().teardown()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(schedule={self.schedule!r}, n_microbatches={self._n_microbatches}, "
                f"stages_per_rank={self.stages_per_rank}, degrees={self._degrees})")


def _get(module: torch.nn.Module, path: str) -> Any:
    try:
        return module.get_submodule(path)
    except AttributeError:
        return None


@contextlib.contextmanager
def _recording_logs(module: torch.nn.Module, active: bool, step: dict[str, Any], microbatches: int):
    """On the last stage, ``self.log`` inside ``pipeline_loss`` is recorded, then averaged over the micro-batches."""
    calls: list[tuple[int, str, Any, dict[str, Any]]] = []
    if not active:
        yield calls
        return

    def record(name: str, value: Any, **kwargs: Any) -> None:
        value = value.detach().float().cpu() if isinstance(value, torch.Tensor) else value
        calls.append((step["calls"], name, value, kwargs))

    module.__dict__["log"] = record
    try:
        yield calls
    finally:
        del module.__dict__["log"]
    first_real = step["calls"] - microbatches + 1  # earlier calls: the schedule learning shapes
    merged: dict[str, list] = {}
    for call, name, value, kwargs in calls:
        if call >= first_real:
            merged.setdefault(name, [[], kwargs])[0].append(float(value))
    calls[:] = [(name, sum(values) / len(values), kwargs) for name, (values, kwargs) in merged.items()]


def _replay_logs(module: torch.nn.Module, logged: list) -> None:
    """Every rank logs the last stage's micro-batch means, so rank 0's logger and ``sync_dist`` see them."""
    for name, value, kwargs in logged:
        module.log(name, torch.tensor(value), **kwargs)
