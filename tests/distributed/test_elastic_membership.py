"""Membership changes under torch elastic, on two simulated nodes (two torchrun agents on one machine), in one job.

``torchrun --nnodes=1:2``: a node that leaves (its agent and workers SIGKILLed) makes the other agent restart its
workers at world size 1. Relay continues by itself from the run's newest checkpoint (no ``ckpt_path``; the restart
count says it is a restart), and within each epoch every sample is trained exactly once across the change
(tests/distributed/elastic_script.py records them).

A node that joins: the running agent sees it waiting, stops its workers with SIGTERM (Relay checkpoints and leaves a
preemption note), and both agents start workers at world size 2, which continue from that checkpoint. The agents run
as docs/guides/elastic.md says to start them, with ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: with the store sharing torch turns
on by default, an agent that was rank 0 keeps the previous round's bootstrap address and never writes
``MASTER_ADDR`` for the new round, so the new node waits for it and the old one waits for the new node's
``role_info`` until both time out (torch 2.13, ``DynamicRendezvousHandler.next_rendezvous``; see
docs/guides/elastic.md), and with ``Trainer(elastic_batch="keep_global")``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.chaos import free_port, hosts_store, kill, processes

SCRIPT = Path(__file__).with_name("elastic_script.py")
ROOT = Path(__file__).resolve().parents[2]
# torchrun agents that leave and join: exec'd processes (a forked agent's rendezvous was seen to hang once)
pytestmark = [pytest.mark.timeout(420), pytest.mark.fresh_python]
# A node that died stays a participant of the rendezvous until its keep-alive heartbeats are missed
# keep_alive_interval x keep_alive_max_attempt seconds (torch's default 5 x 3 = 15 s): the survivor's next round
# waits that long before it can complete without it. 1 x 5 s here; last_call_timeout 3 s lets both agents join the
# first round on a busy machine.
RDZV_CONF = "join_timeout=90,last_call_timeout=3,keep_alive_interval=1,keep_alive_max_attempt=5"


def start_node(port: int, out: Path, name: str, extra_env: dict[str, str] | None = None,
               script: Path = SCRIPT, args: tuple[str, ...] = ()) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "RANK", "LOCAL_RANK", "WORLD"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(extra_env or {})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=elastic-test",
           "--max-restarts=3", "--monitor-interval=0.5", f"--rdzv-conf={RDZV_CONF}",
           str(script), str(out), *args]
    log = open(out / f"{name}.log", "w")  # noqa: SIM115 (the process owns it)
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def kill_node(node: subprocess.Popen) -> None:
    """A node dies: its agent and its workers at once (the workers run in their own sessions)."""
    kill(processes(node))
    node.wait(timeout=30)


def wait_for(predicate, timeout: float, what: str, nodes: list[subprocess.Popen], out: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if any(n.poll() not in (None, 0) for n in nodes):
            break
        time.sleep(0.2)
    logs = "\n".join(p.read_text()[-3000:] for p in out.glob("*.log"))
    raise AssertionError(f"timed out waiting for {what}:\n{logs}")


def node_logs(out: Path) -> str:
    return "\n".join(p.read_text()[-3000:] for p in out.glob("node-*.log"))


def checkpoint_at(out: Path, step: int) -> bool:
    return any(f"step={step}" in p.name for p in (out / "ckpts").glob("*.ckpt")) if (out / "ckpts").exists() else False


def trained_per_epoch(out: Path) -> dict[int, Counter]:
    """Samples each epoch trained, counting only steps that survived: a later attempt redoes the steps after the
    checkpoint it resumed from."""
    first_step = {}
    for path in out.glob("start-*-rank*.json"):
        info = json.loads(path.read_text())
        first_step[info["key"]] = info["start_step"]
    keys = sorted(first_step, key=lambda k: first_step[k])
    per_epoch: dict[int, Counter] = {}
    for i, key in enumerate(keys):
        until = first_step[keys[i + 1]] if i + 1 < len(keys) else float("inf")
        for path in out.glob(f"samples-{key}-rank*.jsonl"):
            for line in path.read_text().splitlines():
                record = json.loads(line)
                if record["step"] < until:
                    per_epoch.setdefault(record["epoch"], Counter()).update(record["samples"])
    return per_epoch


def starts(out: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in out.glob("start-*-rank*.json")),
                  key=lambda s: (s["start_step"], s["rank"]))


def assert_every_sample_once(out: Path, samples: int = 48) -> None:
    per_epoch = trained_per_epoch(out)
    assert sorted(per_epoch) == [0, 1]
    for epoch, counts in per_epoch.items():
        assert sorted(counts) == list(range(samples)), f"epoch {epoch}: missing {set(range(samples)) - set(counts)}"
        assert set(counts.values()) == {1}, f"epoch {epoch}: trained twice: {[s for s, c in counts.items() if c > 1]}"


# the agents of a job that nodes may join (see the module docstring); two nodes take batches of 2, and
# elastic_batch="keep_global" keeps that global batch of 4 on one node (accumulation 2) and back at two (accumulation
# 1), so the samples one node saw are always a whole number of steps at two: without it, a join after an odd step
# count trains one batch twice (rescale_position's warning)
# 96 samples: the single node's slow steps would last ~20 s, time enough for a new agent to start on a busy machine
JOINABLE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "ELASTIC_ACCUMULATE": "1", "ELASTIC_BATCH": "keep_global",
            "ELASTIC_SAMPLES": "96"}


def test_a_node_leaving_restarts_the_other_at_world_size_one_and_a_node_joining_restarts_both_at_two(tmp_path):
    """One job, both membership changes: two nodes train; one leaves (SIGKILLed with its workers) and the other's
    agent restarts its worker at world size 1, which continues from the newest checkpoint by itself (the restart
    count says it is a restart) with accumulation 2; a new node joins, the running agent stops that worker with
    SIGTERM (it checkpoints at the end of an accumulated step), and both continue at world size 2 from that
    checkpoint. Within each epoch every sample is trained exactly once across both changes."""
    port = free_port()
    a = start_node(port, tmp_path, "node-a", JOINABLE)
    b = start_node(port, tmp_path, "node-b", JOINABLE)
    c = None
    try:
        wait_for(lambda: checkpoint_at(tmp_path, 4), 180, "a checkpoint at step 4", [a, b], tmp_path)
        if hosts_store(b, port):  # the store's host plays a cluster's stable rendezvous host: the other leaves
            a, b = b, a
        kill_node(b)
        alone = lambda: [s for s in starts(tmp_path) if s["world"] == 1]  # noqa: E731
        wait_for(lambda: alone() and any(checkpoint_at(tmp_path, alone()[0]["start_step"] + n) for n in (1, 2)), 180,
                 "the restart at world size 1 to train", [a], tmp_path)
        c = start_node(port, tmp_path, "node-c", JOINABLE)
        assert a.wait(timeout=180) == 0, node_logs(tmp_path)
        assert c.wait(timeout=60) == 0, node_logs(tmp_path)
    finally:
        for node in (a, b, c):
            if node is not None and node.poll() is None:
                kill_node(node)
    seen = starts(tmp_path)
    assert [(s["world"], s["rank"], s["accumulate"]) for s in seen] == [(2, 0, 1), (2, 1, 1), (1, 0, 2), (2, 0, 1),
                                                                        (2, 1, 1)], seen
    alone = seen[2]
    assert alone["start_step"] >= 4 and alone["restart"] >= 1, seen  # the restart count said it was a restart
    resumed = seen[3]["start_step"]
    assert resumed > alone["start_step"] and seen[4]["start_step"] == resumed, seen  # both from the same checkpoint
    # the SIGTERM checkpoint is the newest one the single node wrote: no step after it was lost
    samples_alone = (tmp_path / f"samples-{alone['key']}-rank0.jsonl").read_text().splitlines()
    assert max(json.loads(line)["step"] for line in samples_alone) == resumed - 1
    # the worker of torchrun's agent checkpointed on the agent's SIGTERM (what torchrun passes on from Kubernetes)
    logs = "".join(p.read_text() for p in tmp_path.glob("node-*.log"))
    assert f"relay: SIGTERM received; stopped after step {resumed}, saving {tmp_path / 'ckpts' / 'last.ckpt'}" in logs
    assert_every_sample_once(tmp_path, samples=96)
    assert (tmp_path / "final.pt").is_file()
