#!/usr/bin/env python
"""Pipeline schedules measured: bubble fraction, activations held per stage, and step time against one process.

Raw ``torch.distributed.pipelining`` schedules (the ones ``strategy=pipeline`` runs) on ``p`` processes over
gloo on the CPU, stages cut by Relay's splitter from an MLP of ``--blocks`` equal residual blocks (so stages
cost the same and the theory applies); a ``--batch`` batch split into ``m`` = ``--microbatches``
micro-batches. Every schedule runs ``--repeats`` times, interleaved (round-robin) with the others and with
the one-process reference, and the medians are printed. Per schedule and rank:

  bubble     1 - (time inside this rank's forward/backward chunks) / (step time), averaged over ranks.
             Theory for equal stages and free communication: GPipe and 1F1B (p-1)/(m+p-1); interleaved 1F1B
             with v stages per rank (p-1)/(v*m+p-1); zero-bubble schedules split backward into input and
             weight gradients and fill the bubble with the latter (ZBV: about 0 when m >= 2p).
  held       the most micro-batches whose activations a rank holds at once (forward done, backward not yet),
             and the peak bytes of tensors autograd saved for backward on that rank (``saved_tensors_hooks``).
             Expected peaks: GPipe m on every rank; 1F1B p-r on rank r (at most m).
  step       median step time; ``vs 1 proc`` is one process running the whole batch's forward and backward.

On 2 CPU cores shared with other work, communication and contention inflate the bubbles; the theory assumes
neither. ``--quick`` is a smoke test whose figures mean nothing.

  python benchmarks/pipeline.py                      # p=2, m=8, 8 blocks of width 512
  python benchmarks/pipeline.py --microbatches 4 --repeats 5
  python benchmarks/pipeline.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b", "interleaved_zb", "zbv")


def build(blocks: int, width: int):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(x)))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    class Holder(nn.Module):  # the Module side of the pipeline contract
        pipeline_blocks = "model.blocks"

        def __init__(self) -> None:
            super().__init__()
            self.model = MLP()

        def pipeline_loss(self, output, target):
            return (output - target).pow(2).mean()

    torch.manual_seed(0)
    return Holder()


def theory(schedule: str, p: int, m: int, v: int) -> float:
    if schedule in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if schedule == "interleaved_1f1b":
        return (p - 1) / (v * m + p - 1)
    return 0.0


def expected_held(schedule: str, rank: int, p: int, m: int) -> str:
    return {"gpipe": str(m), "1f1b": str(min(m, p - rank))}.get(schedule, "-")


class Meter:
    """Wall time inside compute chunks, micro-batches in flight, bytes saved for backward."""

    def __init__(self) -> None:
        self.busy = 0.0
        self.in_flight = self.peak_in_flight = 0
        self.saved = self.peak_saved = 0

    def wrap(self, stage) -> None:
        meter = self

        def timed(fn, delta):
            def run(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    meter.busy += time.perf_counter() - start
                    meter.in_flight += delta
                    meter.peak_in_flight = max(meter.peak_in_flight, meter.in_flight)
            return run

        stage.forward_one_chunk = timed(stage.forward_one_chunk, +1)
        stage.backward_one_chunk = timed(stage.backward_one_chunk, -1)
        stage.backward_weight_one_chunk = timed(stage.backward_weight_one_chunk, 0)

    def hooks(self):
        import torch

        meter = self

        class Held:
            def __init__(self, t) -> None:
                self.t, self.n = t, t.numel() * t.element_size()
                meter.saved += self.n
                meter.peak_saved = max(meter.peak_saved, meter.saved)

            def __del__(self) -> None:
                meter.saved -= self.n

        return torch.autograd.graph.saved_tensors_hooks(Held, lambda h: h.t)


def worker(rank: int, world: int, args: argparse.Namespace, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.pipelining as pipelining

    from plugins.strategies import pipeline_split as split
    from plugins.strategies.pipeline import SCHEDULES as KINDS

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results: dict[str, list] = {s: [] for s in args.schedules}
    torch.manual_seed(1)
    x, y = torch.randn(args.batch, args.width), torch.randn(args.batch, args.width)
    runners = {}
    for name in args.schedules:
        kind = KINDS[name][1]
        v = 1 if kind == "single" else 2
        holder = build(args.blocks, args.width)
        pipelined = split.find_pipeline(holder)
        stages = split.stage_blocks(pipelined, split.stage_starts(pipelined, world * v, None))
        local = split.local_stages(kind, rank, world, v)
        split.prune(pipelined, stages, local)
        meter = Meter()
        built = []
        for index in local:
            stage = pipelining.PipelineStage(split.stage_module(pipelined, stages, index), index, world * v,
                                             torch.device("cpu"))
            meter.wrap(stage)
            built.append(stage)
        cls = getattr(pipelining, KINDS[name][0])
        schedule = cls(built[0] if kind == "single" else built, args.microbatches, loss_fn=holder.pipeline_loss)
        runners[name] = (schedule, meter, 0 in local, world * v - 1 in local, v)
    for repeat in range(args.repeats + 1):  # the first round warms up (shape inference)
        for name in args.schedules:
            schedule, meter, first, last, v = runners[name]
            meter.busy, meter.peak_in_flight, meter.peak_saved = 0.0, 0, 0
            dist.barrier()
            start = time.perf_counter()
            with meter.hooks():
                schedule.step(*((x,) if first else ()), target=y if last else None)
            took = time.perf_counter() - start
            if repeat:
                results[name].append((took, meter.busy, meter.peak_in_flight, meter.peak_saved))
    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()


def single_step(args: argparse.Namespace) -> list[float]:
    import torch

    torch.set_num_threads(1)
    holder = build(args.blocks, args.width)
    torch.manual_seed(1)
    x, y = torch.randn(args.batch, args.width), torch.randn(args.batch, args.width)
    times = []
    for repeat in range(args.repeats + 1):
        start = time.perf_counter()
        holder.pipeline_loss(holder.model(x), y).backward()
        if repeat:
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot", metavar="PATH", help="also draw bubbles and saved activations (SVG/PNG; matplotlib)")
    args = parser.parse_args()
    if args.quick:
        args.blocks, args.width, args.batch, args.repeats, args.microbatches = 4, 16, 8, 1, 4
    args.schedules = args.schedules.split(",")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p, m = args.processes, args.microbatches
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.json")
        os.environ["OMP_NUM_THREADS"] = "1"
        mp.start_processes(worker, args=(p, args, port, out), nprocs=p, join=True, start_method="spawn")
        with open(out) as f:
            per_rank = json.load(f)
    single = statistics.median(single_step(args))
    print(f"p={p} processes (gloo, CPU), m={m} micro-batches, batch {args.batch}, {args.blocks} blocks of width "
          f"{args.width}, {args.repeats} interleaved repeats; one process: {single * 1e3:.1f} ms/step")
    print(f"{'schedule':<17}{'bubble':>8}{'theory':>8}{'step ms':>9}{'vs 1 proc':>10}   held per rank "
          "(micro-batches measured/expected, MB saved)")
    rows = []
    for name in args.schedules:
        v = 1 if name in ("gpipe", "1f1b") else 2
        steps = [statistics.median(r[0] for r in rank[name]) for rank in per_rank]
        bubble = statistics.mean(1 - statistics.median(r[1] / r[0] for r in rank[name]) for rank in per_rank)
        held = ", ".join(
            f"r{r}: {max(x[2] for x in rank[name])}/{expected_held(name, r, p, m)} "
            f"{max(x[3] for x in rank[name]) / 2**20:.1f}MB" for r, rank in enumerate(per_rank))
        step = max(steps)
        print(f"{name:<17}{bubble:>8.2f}{theory(name, p, m, v):>8.2f}{step * 1e3:>9.1f}{step / single:>9.2f}x   {held}")
        rows.append({"schedule": name, "bubble": bubble, "theory": theory(name, p, m, v),
                     "activations_mb": [max(x[3] for x in rank[name]) / 2**20 for rank in per_rank]})
    if args.plot:
        from plots import pipeline_chart  # benchmarks/plots.py, next to this script

        pipeline_chart(rows, args.plot, f"python benchmarks/pipeline.py --processes {p} --microbatches {m} "
                                        f"--blocks {args.blocks} --width {args.width} --batch {args.batch}")
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
