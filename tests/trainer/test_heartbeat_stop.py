"""The heartbeat thread is gone when its stage ends: a daemon thread still inside the store's C++ call when the
interpreter finalizes aborts the process (SIGABRT after a run that succeeded)."""

from __future__ import annotations

import datetime
import socket

import torch.distributed as dist

from trainer.heartbeat import Heartbeat
from trainer.loops.progress import LoopProgress


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stop_waits_for_the_thread_and_the_last_beat_is_in_the_store():
    store = dist.TCPStore("127.0.0.1", _free_port(), 1, is_master=True, timeout=datetime.timedelta(seconds=30))
    beat = Heartbeat(LoopProgress(), store, rank=0, world_size=2, interval=0.05)
    beats = dist.PrefixStore("relay/heartbeat", store)
    beat.start()
    beats.wait(["0"])  # it beats
    beat.stop()
    assert not beat._thread.is_alive()
    assert b'"step": 0' in beats.get("0")
