"""The heartbeat thread is gone when its stage ends: a daemon thread still inside the store's C++ call when the
interpreter finalizes aborts the process (SIGABRT after a run that succeeded). And it beats while the main thread
is blocked on the same store: a TCP store client runs one call at a time, so sharing the main thread's connection
held every beat behind a ``wait`` (CI failed on this: the test's own ``wait`` blocked the first beat for 30 s)."""

from __future__ import annotations

import datetime
import socket
import threading
import time

import torch.distributed as dist

from trainer.distributed.heartbeat import Heartbeat
from trainer.loops.progress import LoopProgress


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _store(port: int, is_master: bool, seconds: float) -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", port, 1, is_master=is_master, timeout=datetime.timedelta(seconds=seconds),
                         multi_tenant=True)


def test_stop_waits_for_the_thread_and_the_last_beat_is_in_the_store():
    store = _store(_free_port(), True, 30)
    beats = dist.PrefixStore("relay/heartbeat", store)
    beat = Heartbeat(LoopProgress(), store, rank=0, world_size=2, interval=0.05)
    beat.start()
    beats.wait(["0"])  # it beats, although this thread waits on the connection it was given
    beat.stop()
    assert not beat._thread.is_alive()
    assert b'"step": 0' in beats.get("0")


def test_beats_reach_the_store_while_the_main_thread_is_blocked_on_it():
    port = _free_port()
    shared = _store(port, True, 30)
    blocked = threading.Thread(target=shared.wait, args=(["gate"],), daemon=True)
    blocked.start()  # the main thread's connection, stuck in a wait as in a store-based barrier
    time.sleep(0.2)
    beat = Heartbeat(LoopProgress(), shared, rank=0, world_size=2, interval=0.05)
    beat.start()
    observer = _store(port, False, 5)
    try:
        dist.PrefixStore("relay/heartbeat", observer).wait(["0"])  # times out when the beat queues behind the wait
    finally:
        observer.set("gate", "open")
        blocked.join(timeout=10)
        beat.stop()
    assert not blocked.is_alive()
