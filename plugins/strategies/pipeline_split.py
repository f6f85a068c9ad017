"""Cutting a Module into pipeline stages: the contract it meets, where the cuts go, and the stage modules.

The contract (checked by ``find_pipeline``; the bundled GPT meets it):

- ``pipeline_blocks = "model.blocks"``: the dotted path of an ``nn.ModuleList``/``nn.Sequential`` of blocks.
  Its parent (here ``model``) is the *pipelined model*: each stage runs the parent's ``forward`` on a copy
  that holds only that stage's blocks.
- The parent's children registered before the blocks (embeddings) live on the first stage, those registered
  after them (final norm, head) on the last; elsewhere they are ``None``, and the parent's ``forward`` skips a
  part that is ``None`` (so a later stage takes hidden states instead of token ids). Iterating the blocks
  (``for block in self.blocks``) runs the stage's blocks; the parent holds no parameters of its own, and the
  Module holds none outside the parent.
- ``pipeline_loss(output, target)``: the loss of one micro-batch from the parent's output (the mean over the
  micro-batch, like ``training_step``'s loss); it runs on the last stage, and what it ``self.log``\\ s is
  averaged over micro-batches and reported from every rank (rank 0's logger included).
- Optional ``pipeline_inputs(batch) -> (inputs, target)``; the default takes ``(batch[0], batch[1])``.

Blocks keep their names (``blocks.2`` stays ``blocks.2`` on stage 1), so checkpoints line up across layouts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from torch import nn

CONTRACT_HINT = ("set pipeline_blocks = 'model.blocks' (the nn.ModuleList/nn.Sequential of blocks) and define "
                 "pipeline_loss(self, output, target); see docs/guides/strategies.md, 'Pipeline parallelism'")


@dataclass
class PipelinedModel:
    """Where the blocks are: the parent module, its attribute name, the parent's path in the Module."""

    parent: nn.Module
    parent_path: str
    attr: str

    @property
    def blocks(self) -> nn.Module:
        return getattr(self.parent, self.attr)

    def block_names(self) -> list[str]:
        return list(self.blocks._modules)

    def before_and_after(self) -> tuple[list[str], list[str]]:
        """The parent's other children: registered before the blocks (first stage) and after (last stage)."""
        names = list(self.parent._modules)
        at = names.index(self.attr)
        return names[:at], names[at + 1:]


def find_pipeline(module: nn.Module) -> PipelinedModel:
    """The Module's blocks and their parent; a clear error naming what is missing otherwise."""
    cls = type(module).__name__
    path = getattr(module, "pipeline_blocks", None)
    if not isinstance(path, str) or not path:
        raise ValueError(f"strategy=pipeline: {cls} does not say what to pipeline (pipeline_blocks is {path!r}); "
                         f"{CONTRACT_HINT}.")
    if not callable(getattr(module, "pipeline_loss", None)):
        raise ValueError(f"strategy=pipeline: {cls} has no pipeline_loss(output, target) to compute the loss on the "
                         f"last stage; {CONTRACT_HINT}.")
    parent_path, _, attr = path.rpartition(".")
    try:
        parent = module.get_submodule(parent_path)
        blocks = getattr(parent, attr)
    except AttributeError:
        raise ValueError(f"strategy=pipeline: {cls}.pipeline_blocks={path!r} names no submodule; {CONTRACT_HINT}.")
    if not isinstance(blocks, (nn.ModuleList, nn.Sequential)) or len(blocks) == 0:
        raise ValueError(f"strategy=pipeline: {cls}.pipeline_blocks={path!r} is a {type(blocks).__name__}, not a "
                         f"non-empty nn.ModuleList or nn.Sequential of blocks; {CONTRACT_HINT}.")
    if parent is module:
        raise ValueError(f"strategy=pipeline: {cls}.pipeline_blocks={path!r} is on the Module itself; put the model "
                         f"in a submodule (self.model = ...) and name 'model.{path}'.")
    own = [n for n, _ in parent.named_parameters(recurse=False)]
    outside = [n for n, _ in module.named_parameters() if not (n + ".").startswith(parent_path + ".")]
    if own or outside:
        raise ValueError(f"strategy=pipeline: {cls} has parameters no stage owns ({', '.join((own or outside)[:3])}): "
                         f"keep every parameter inside a child of {parent_path!r} (embeddings, blocks, head).")
    return PipelinedModel(parent, parent_path, attr)


def split_by_parameters(sizes: list[int], n_stages: int) -> list[int]:
    """Start index of every stage: contiguous blocks, the largest stage as small as possible (exact, O(n^2 S))."""
    n = len(sizes)
    check_block_count(n, n_stages)
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(n_stages + 1)]  # best[k][i]: first i blocks in k stages
    cut = [[0] * (n + 1) for _ in range(n_stages + 1)]
    best[0][0] = 0
    for k in range(1, n_stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j])
                if cost < best[k][i]:
                    best[k][i], cut[k][i] = cost, j
    starts, i = [], n
    for k in range(n_stages, 0, -1):
        i = cut[k][i]
        starts.append(i)
    return starts[::-1]


def check_block_count(n_blocks: int, n_stages: int) -> None:
    """Every stage needs a block of its own."""
    if n_blocks < n_stages:
        blocks = "1 block" if n_blocks == 1 else f"{n_blocks} blocks"
        raise ValueError(f"strategy=pipeline: {blocks} cannot fill {n_stages} stages (every stage holds at least one "
                         f"block); use fewer stages (trainer.devices, strategy.pp, strategy.stages_per_rank) or a "
                         f"model with {n_stages} or more blocks (the bundled GPT: model.n_layer={n_stages}).")


def stage_starts(pipelined: PipelinedModel, n_stages: int, split_points: list[str] | None) -> list[int]:
    """Where each stage begins, from ``split_points`` (``blocks.2``: stage 1 starts there) or by parameter count."""
    names = pipelined.block_names()
    check_block_count(len(names), n_stages)
    if not split_points:
        sizes = [sum(p.numel() for p in pipelined.blocks._modules[k].parameters()) for k in names]
        return split_by_parameters(sizes, n_stages)
    if len(split_points) != n_stages - 1:
        raise ValueError(f"strategy.split_points={list(split_points)} gives {len(split_points) + 1} stages, but the "
                         f"layout has {n_stages} (pp x stages_per_rank); name {n_stages - 1} blocks, e.g. "
                         f"strategy.split_points=[{pipelined.attr}.{names[len(names) // 2]}].")
    starts = [0]
    for point in split_points:
        key = str(point).rpartition(".")[2]
        if key not in names or not (str(point) == key or str(point).endswith(f"{pipelined.attr}.{key}")):
            raise ValueError(f"strategy.split_points: {point!r} is not a block that can start a stage; valid: "
                             f"{', '.join(f'{pipelined.attr}.{k}' for k in names[1:])} (the first block, "
                             f"{pipelined.attr}.{names[0]}, always starts stage 1), e.g. "
                             f"strategy.split_points=[{pipelined.attr}.{names[len(names) // 2]}].")
        starts.append(names.index(key))
    if starts != sorted(set(starts)) or starts[1] == 0:
        raise ValueError(f"strategy.split_points={list(split_points)} must name increasing blocks after the first, "
                         f"e.g. [{pipelined.attr}.{names[len(names) // 2]}].")
    return starts


def stage_blocks(pipelined: PipelinedModel, starts: list[int]) -> list[list[str]]:
    names = pipelined.block_names()
    ends = starts[1:] + [len(names)]
    return [names[a:b] for a, b in zip(starts, ends)]


def _detach_view(module: nn.Module) -> nn.Module:
    """A shallow copy sharing parameters and children, with its own registries and hooks."""
    view = copy.copy(module)
    view.__dict__ = {k: (type(v)(v) if isinstance(v, dict) else v) for k, v in module.__dict__.items()}
    return view


def prune(pipelined: PipelinedModel, stages: list[list[str]], local: list[int]) -> None:
    """Keep on this rank only the blocks (and first/last parts) of its stages; names stay as they were."""
    keep = {name for s in local for name in stages[s]}
    blocks = pipelined.blocks
    for name in list(blocks._modules):
        if name not in keep:
            del blocks._modules[name]  # not ``del blocks[i]``: that renumbers the rest
    before, after = pipelined.before_and_after()
    for name in before if 0 not in local else []:
        setattr(pipelined.parent, name, None)
    for name in after if len(stages) - 1 not in local else []:
        setattr(pipelined.parent, name, None)


def stage_module(pipelined: PipelinedModel, stages: list[list[str]], index: int) -> nn.Module:
    """The parent as stage ``index`` sees it: its blocks only, the first/last parts only on the ends."""
    view = _detach_view(pipelined.parent)
    blocks = _detach_view(pipelined.blocks)
    blocks._modules = {k: pipelined.blocks._modules[k] for k in stages[index]}
    view._modules[pipelined.attr] = blocks
    before, after = pipelined.before_and_after()
    for name in before if index != 0 else []:
        view._modules[name] = None
    for name in after if index != len(stages) - 1 else []:
        view._modules[name] = None
    return view


def local_stages(schedule_kind: str, pp_rank: int, pp: int, per_rank: int) -> list[int]:
    """Stage indices this rank runs: looped (``r, r + pp, ...``) or V-shaped (``r, 2 pp - 1 - r``) for ZBV."""
    if schedule_kind == "v":
        return [pp_rank, 2 * pp - 1 - pp_rank]
    return [pp_rank + k * pp for k in range(per_rank)]


def split_batch(module: nn.Module, batch: Any) -> tuple[Any, Any]:
    """``(inputs, target)`` of a training batch: the Module's ``pipeline_inputs`` or ``batch[0], batch[1]``."""
    custom = getattr(module, "pipeline_inputs", None)
    if callable(custom):
        return custom(batch)
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return batch[0], batch[1]
    raise ValueError(f"strategy=pipeline: a {type(batch).__name__} batch is not (inputs, target); define "
                     f"pipeline_inputs(self, batch) -> (inputs, target) on {type(module).__name__}.")

