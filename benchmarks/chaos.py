"""Chaos run: the bundled GPT trained on 2 simulated nodes while ranks and nodes are killed, against an
uninterrupted run of the same job.

Two torchrun agents on this machine (``--nproc-per-node=1`` each, c10d rendezvous), one worker each, run
``Trainer(strategy="ddp", num_nodes="auto")`` on the sorting example's GPT (``trainer/examples/gpt_module.py``,
tiny sizes by default) with a checkpoint every ``--every`` steps. Two scenarios, each compared with its own
uninterrupted run:

- ``rank``: ``--failures`` times a random rank's worker is SIGKILLed (``--nnodes=2``, ``--max-restarts``): the agents
  restart both workers, which continue from the newest checkpoint; the final weights must be bit-identical.
- ``node``: ``--failures`` times the node that does not host the rendezvous store is SIGKILLed with its agent
  (``--nnodes=1:2``); the other continues alone at world size 1, then the node is started again and joins, and both
  continue at world size 2 (``Trainer(elastic_batch="keep_global")``: accumulation 2 while alone). Within the epoch
  every sample must be trained exactly once, and the mean loss of the last steps must be within the uninterrupted
  run's noise (its step-to-step spread over the same window).

- ``spike``: ``--failures`` poisoned batches at seeded steps, recovered in-process by ``Trainer(spike_recovery=...)``
  (``benchmarks/chaos_spike.py``): one process, against the same job on clean data.

It prints the time lost per failure (wall time of the run with failures minus the uninterrupted one, divided by
the failures) and exits 1 if a check fails. ``--short`` is the CI form (tests/distributed/test_chaos.py).

    python benchmarks/chaos.py --seed 0 --failures 3 --steps 300
    python benchmarks/chaos.py --short
    python benchmarks/chaos.py --scenarios spike --failures 4 --steps 300 --every 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the agents of a job that nodes may join: torch's shared rendezvous store does not give a joining node the new
# round's MASTER_ADDR (docs/guides/elastic.md), so each round publishes its own
AGENT_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


# --- the worker: one rank, started by torchrun ------------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    from trainer import Trainer, seed_everything
    from trainer.callbacks import ModelCheckpoint
    from trainer.examples.gpt_module import GPTModule
    from trainer.examples.sorting import SortingDataset

    out = Path(args.out)
    world = int(os.environ.get("WORLD_SIZE", args.devices))  # unset in the launching process of --devices 2

    class Indexed(Dataset):
        """The sorting data with each sample's index, so the run can account for every sample."""

        def __init__(self, size: int) -> None:
            self.data = SortingDataset(size, seq_len=6, seed=args.seed)

        def __len__(self) -> int:
            return len(self.data)

        def __getitem__(self, i: int):
            return (i, *self.data[i])

    class ChaosGPT(GPTModule):
        def on_train_start(self) -> None:
            restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
            # one start of the workers, the same name on every rank: each rendezvous round publishes its own port
            key = f"s{self.trainer.global_step:05d}-w{self.trainer.world_size}-p{os.environ['MASTER_PORT']}"
            self.key, rank = key, self.global_rank
            self.samples = open(out / f"samples-{key}-rank{rank}.jsonl", "a")  # noqa: SIM115 (closed at the end)
            self.losses = open(out / f"losses-{key}.jsonl", "a") if rank == 0 else None  # noqa: SIM115
            start = {"key": key, "restart": restart, "rank": rank, "world": self.trainer.world_size,
                     "start_step": self.trainer.global_step, "accumulate": self.trainer.accumulate_grad_batches,
                     "time": time.time()}
            (out / f"start-{key}-rank{rank}.json").write_text(json.dumps(start))

        def training_step(self, batch, batch_idx):
            index, x, y = batch
            step = self.trainer.global_step
            self.samples.write(json.dumps({"step": step, "epoch": self.current_epoch, "samples": index.tolist()}) + "\n")
            self.samples.flush()
            loss = super().training_step((x, y), batch_idx)
            time.sleep(args.step_seconds)  # a step as long as a real model's, so failures land mid-run
            if self.losses is not None:
                self.losses.write(json.dumps({"step": step, "loss": loss.item(), "time": time.time()}) + "\n")
                self.losses.flush()
            return loss

        def on_train_end(self) -> None:
            self.samples.close()
            if self.losses is not None:
                self.losses.close()
                torch.save(self.model.state_dict(), out / "final.pt")

    seed_everything(args.seed)
    size = args.steps * 2 * args.batch_size  # one epoch of `steps` optimizer steps at a global batch of 2 x batch
    module = ChaosGPT(n_layer=args.n_layer, n_head=2, n_embd=args.n_embd, block_size=12, vocab_size=11,
                      warmup_steps=max(1, args.steps // 10), max_steps=args.steps)
    trainer = Trainer(
        accelerator="cpu", strategy="ddp", devices=args.devices, num_nodes="auto" if args.devices == 1 else 1,
        max_epochs=1, logger=False,
        default_root_dir=str(out), enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
        accumulate_grad_batches=max(1, 2 // world), elastic_batch="keep_global",
        callbacks=[ModelCheckpoint(dirpath=str(out / "ckpts"), every_n_train_steps=args.every, save_last=True)],
    )
    trainer.fit(module, DataLoader(Indexed(size), batch_size=args.batch_size, shuffle=True))


# --- the nodes: torchrun agents on this machine ------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_command(out: Path, args: argparse.Namespace) -> list[str]:
    """This program as one rank's worker (``--devices 2``: as a Relay launch of both ranks on this machine)."""
    return [str(Path(__file__).resolve()), "--worker", str(out), "--seed", str(args.seed), "--steps", str(args.steps),
            "--every", str(args.every), "--batch-size", str(args.batch_size), "--step-seconds", str(args.step_seconds),
            "--n-layer", str(args.n_layer), "--n-embd", str(args.n_embd)]


def job_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "RANK", "LOCAL_RANK", "WORLD"))}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1", **extra)
    return env


def start_agent(out: Path, name: str, port: int, nnodes: str, args: argparse.Namespace) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=chaos-{port}",
           f"--max-restarts={args.failures + 1}", "--monitor-interval=0.5",
           f"--rdzv-conf={args.rdzv_conf}", *worker_command(out, args)]
    log = open(out / f"{name}.log", "a")  # noqa: SIM115 (the process owns it)
    return subprocess.Popen(cmd, env=job_env(**AGENT_ENV), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def start_one_launch(out: Path, args: argparse.Namespace) -> subprocess.Popen:
    """The uninterrupted job of ``--short``: the same two ranks (DDP over gloo, the same data, seeds and batches) as
    one Relay launch (``python chaos.py --worker OUT ... --devices 2``), whose workers are forked from it: no
    agents, and a third of the start-up. The timing figure needs the same topology, so only ``--short`` uses it."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in job_env().items() if not k.startswith("MASTER_")}
    log = open(out / "node-0.log", "a")  # noqa: SIM115 (the process owns it)
    return subprocess.Popen([sys.executable, *worker_command(out, args), "--devices", "2"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def processes(agent: subprocess.Popen) -> list:
    import psutil

    try:
        root = psutil.Process(agent.pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def workers(agent: subprocess.Popen) -> list:
    return [p for p in processes(agent)[1:] if "--worker" in " ".join(_cmdline(p))]


def _cmdline(proc) -> list[str]:
    import psutil

    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def kill(procs: list) -> None:
    import psutil

    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def hosts_store(agent: subprocess.Popen, port: int) -> bool:
    import psutil

    for proc in processes(agent):
        try:
            if any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in proc.net_connections()):
                return True
        except psutil.Error:
            continue
    return False


# --- what a run left behind ----------------------------------------------------------------------------------------
def read_jsonl(paths) -> list[dict]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]


def starts(out: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in out.glob("start-*.json")), key=lambda s: (s["time"], s["rank"]))


def newest_step(out: Path) -> int:
    steps = [r["step"] for r in read_jsonl(out.glob("losses-*.jsonl"))]
    return max(steps, default=-1)


def surviving(out: Path, prefix: str) -> list[dict]:
    """Records of the steps that count: a later start redoes the steps after the checkpoint it resumed from."""
    begin = {}
    for s in starts(out):
        begin.setdefault(s["key"], (s["time"], s["start_step"]))
    keys = sorted(begin, key=lambda k: begin[k])
    kept = []
    for i, key in enumerate(keys):
        until = begin[keys[i + 1]][1] if i + 1 < len(keys) else float("inf")
        kept += [r for r in read_jsonl(out.glob(f"{prefix}-{key}*.jsonl")) if r["step"] < until]
    return kept


def restarts(out: Path) -> list[tuple[float, int]]:
    """Per start of the workers after the first: seconds without training (rank 0's last step before it to its first
    step in it) and the steps it trained again (those after the checkpoint it resumed from)."""
    records = {}
    for s in starts(out):
        if s["rank"] == 0:
            records[s["key"]] = (s, read_jsonl(out.glob(f"losses-{s['key']}.jsonl")))
    ordered = sorted(records.values(), key=lambda r: r[0]["time"])
    gaps = []
    for (_, before), (start, after) in pairwise(ordered):
        if before and after:
            gaps.append((after[0]["time"] - before[-1]["time"], before[-1]["step"] + 1 - start["start_step"]))
    return gaps


def sample_counts(out: Path) -> Counter:
    counts: Counter = Counter()
    for record in surviving(out, "samples"):
        counts.update(record["samples"])
    return counts


def loss_curve(out: Path) -> dict[int, float]:
    """Rank 0's loss per optimizer step (the mean of its batches when it accumulates)."""
    per_step: dict[int, list[float]] = {}
    for record in surviving(out, "losses"):
        per_step.setdefault(record["step"], []).append(record["loss"])
    return {step: sum(v) / len(v) for step, v in sorted(per_step.items())}


# --- the scenarios --------------------------------------------------------------------------------------------------
def run_job(out: Path, args: argparse.Namespace, mode: str, kills: list[int], rng: random.Random) -> float:
    """One job on two simulated nodes; ``kills``: the steps at which a failure is injected. Returns its wall time."""
    out.mkdir(parents=True, exist_ok=True)
    port, nnodes = free_port(), "2" if mode == "rank" else "1:2"
    began = time.monotonic()
    nodes = [start_agent(out, "node-0", port, nnodes, args), start_agent(out, "node-1", port, nnodes, args)]
    deadline = began + args.timeout
    try:
        for n, step in enumerate(kills):
            wait(lambda step=step: newest_step(out) >= step, deadline, f"step {step}", nodes, out)
            if mode == "rank":
                target = rng.randrange(2)
                victims = workers(nodes[target])
                print(f"  failure {n + 1}: SIGKILL rank on node-{target} at step {newest_step(out)}", flush=True)
                kill(victims)
            else:
                node_leaves_and_joins(out, nodes, port, nnodes, args, deadline, n)
        for node in nodes:
            left = deadline - time.monotonic()
            if node.wait(timeout=max(left, 1)) != 0:
                raise RuntimeError(f"an agent exited with {node.returncode}:\n{logs(out)}")
    finally:
        for node in nodes:
            if node.poll() is None:
                kill(processes(node))
    return time.monotonic() - began


def node_leaves_and_joins(out: Path, nodes: list[subprocess.Popen], port: int, nnodes: str,
                          args: argparse.Namespace, deadline: float, n: int) -> None:
    """The node that does not host the rendezvous store dies with its agent; the other trains alone at world size
    1 for ``--alone-steps`` steps; then the node starts again and both continue at world size 2."""
    leaving = 1 if hosts_store(nodes[0], port) else 0
    print(f"  failure {n + 1}: SIGKILL node-{leaving} (agent and worker) at step {newest_step(out)}", flush=True)
    kill(processes(nodes[leaving]))
    nodes[leaving].wait(timeout=30)
    survivor = nodes[1 - leaving]
    seen = len(starts(out))
    wait(lambda: any(s["world"] == 1 for s in starts(out)[seen:]), deadline, "a restart at world size 1", [survivor], out)
    alone_from = newest_step(out)
    wait(lambda: newest_step(out) >= alone_from + args.alone_steps, deadline, "steps alone", [survivor], out)
    print(f"  node-{leaving} joins again at step {newest_step(out)}", flush=True)
    seen = len(starts(out))
    nodes[leaving] = start_agent(out, f"node-{leaving}", port, nnodes, args)
    wait(lambda: any(s["world"] == 2 for s in starts(out)[seen:]), deadline, "a restart at world size 2", nodes, out)


def wait(predicate, deadline: float, what: str, nodes: list[subprocess.Popen], out: Path) -> None:
    while time.monotonic() < deadline:
        if predicate():
            return
        if any(n.poll() not in (None, 0) for n in nodes):
            break
        time.sleep(0.1)
    raise RuntimeError(f"chaos: gave up waiting for {what}:\n{logs(out)}")


def logs(out: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(out.glob("node-*.log")))


def compare(mode: str, reference: Path, chaos: Path, args: argparse.Namespace) -> list[str]:
    """The checks of one scenario; returns the failures (empty: all hold)."""
    import torch

    failures = []
    for n, (gap, redone) in enumerate(restarts(chaos), 1):
        print(f"  restart {n}: {gap:.1f} s without training, {redone} step(s) trained again")
    counts, size = sample_counts(chaos), args.steps * 2 * args.batch_size
    missing = set(range(size)) - set(counts)
    twice = sorted(s for s, c in counts.items() if c > 1)
    print(f"  samples: {len(counts)}/{size} trained, {len(missing)} skipped, {len(twice)} trained twice")
    if missing or twice:
        failures.append(f"{mode}: sample accounting: skipped {sorted(missing)[:10]}, twice {twice[:10]}")
    want = torch.load(reference / "final.pt", weights_only=True)
    got = torch.load(chaos / "final.pt", weights_only=True)
    worst = max((got[k] - v).abs().max().item() for k, v in want.items())
    identical = all(torch.equal(got[k], v) for k, v in want.items())
    print(f"  final weights: {'bit-identical' if identical else f'max |diff| {worst:.3g}'} to the uninterrupted run")
    if mode == "rank" and not identical:
        failures.append(f"rank: final weights differ from the uninterrupted run (max |diff| {worst:.3g})")
    ref_curve, curve = loss_curve(reference), loss_curve(chaos)
    window = [s for s in ref_curve if s >= args.steps - args.window]
    ref_tail = [ref_curve[s] for s in window]
    tail = [curve[s] for s in window if s in curve]
    mean_ref, mean = sum(ref_tail) / len(ref_tail), sum(tail) / max(len(tail), 1)
    spread = (sum((v - mean_ref) ** 2 for v in ref_tail) / max(len(ref_tail) - 1, 1)) ** 0.5
    print(f"  loss over the last {len(window)} steps: {mean:.4f} vs {mean_ref:.4f} uninterrupted "
          f"(step-to-step spread {spread:.4f})")
    if abs(mean - mean_ref) > max(2 * spread, 1e-6):
        failures.append(f"{mode}: final loss {mean:.4f} is not within 2 x {spread:.4f} of {mean_ref:.4f}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", metavar="OUT", dest="out", help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)  # a worker's; 2: one launch of both
    parser.add_argument("--seed", type=int, default=0, help="seeds the model, the data and the failures")
    parser.add_argument("--failures", type=int, default=3, help="failures injected per scenario")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps of the job (one epoch)")
    parser.add_argument("--every", type=int, default=10, help="a checkpoint every N steps")
    parser.add_argument("--batch-size", type=int, default=8, help="per process; the global batch is 2 x this")
    parser.add_argument("--step-seconds", type=float, default=0.05, help="added to each step (torchft's figure "
                        "was measured with 0.05 s steps)")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-embd", type=int, default=16)
    parser.add_argument("--alone-steps", type=int, default=10, help="steps the survivor trains before the node rejoins")
    parser.add_argument("--rdzv-conf", default="join_timeout=60,last_call_timeout=2",
                        help="torchrun's --rdzv-conf (keep_alive_interval x keep_alive_max_attempt, 5 x 3 s by default, "
                             "is how long a dead node holds up the next rendezvous)")
    parser.add_argument("--window", type=int, default=30, help="the last steps whose loss is compared")
    parser.add_argument("--scenarios", help="rank, node, spike, or several with commas (default: rank,node; "
                        "--short: rank)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per job before giving up")
    parser.add_argument("--out-dir", help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--short", action="store_true", help="the CI form: 30 steps, 1 rank failure, the "
                        "uninterrupted run alongside as one Relay launch of both ranks (no timing figure)")
    args = parser.parse_args()
    if args.out:
        worker(args)
        return 0
    if args.short:
        args.steps, args.failures, args.every, args.window, args.timeout, args.step_seconds = 30, 1, 5, 10, 90, 0.02
        args.alone_steps = 4
        args.scenarios = args.scenarios or "rank"  # a node leaving and joining: tests/distributed/test_elastic_membership.py
    rng = random.Random(args.seed)
    root = Path(args.out_dir or tempfile.mkdtemp(prefix="relay-chaos-"))
    failures, lost = [], {}
    for mode in (args.scenarios or "rank,node").split(","):
        if mode == "spike":  # in-process recovery from poisoned batches (benchmarks/chaos_spike.py)
            from chaos_spike import spike_scenario

            found, lost[mode] = spike_scenario(root / "spike", args)
            failures += found
            continue
        low, high = int(args.steps * 0.2), int(args.steps * 0.8)
        kills = sorted(rng.sample(range(low, high), args.failures))
        if args.short:  # side by side: fast, but the two share the cores, so no timing figure
            print(f"{mode}: uninterrupted run (one launch) alongside {args.failures} failure(s) at steps {kills}",
                  flush=True)
            reference = start_one_launch(root / f"{mode}-reference", args)
            try:
                run_job(root / f"{mode}-chaos", args, mode, kills, rng)
                if reference.wait(timeout=args.timeout) != 0:
                    raise RuntimeError(f"the uninterrupted run exited with {reference.returncode}:\n"
                                       f"{logs(root / f'{mode}-reference')}")
            finally:
                if reference.poll() is None:
                    reference.kill()
        else:
            print(f"{mode}: uninterrupted run", flush=True)
            base = run_job(root / f"{mode}-reference", args, mode, [], rng)
            print(f"{mode}: {args.failures} failure(s) at steps {kills}", flush=True)
            hit = run_job(root / f"{mode}-chaos", args, mode, kills, rng)
            lost[mode] = (hit - base) / args.failures
            print(f"  wall time {hit:.1f} s vs {base:.1f} s uninterrupted: {lost[mode]:.2f} s lost per failure")
        failures += compare(mode, root / f"{mode}-reference", root / f"{mode}-chaos", args)
    if lost:
        print("time lost per failure: " + ", ".join(f"{m} {s:.2f} s" for m, s in lost.items()))
    for line in failures:
        print(f"FAILED {line}")
    print("chaos: all checks hold" if not failures else "chaos: checks failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
