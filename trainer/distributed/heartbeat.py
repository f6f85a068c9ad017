"""Which rank a timed-out collective waited for, and what every rank was doing.

When start-up is over, the strategy's collectives wait at most ``timeout`` seconds. A collective that
times out only tells the waiting rank that *someone* did not come. So every rank runs a small thread that
posts a heartbeat to the rendezvous store every few seconds: its global step and where its main thread is
(the innermost frame in the user's code, the Trainer or the plugins, e.g. ``training_step
(train.py:42)``). A rank whose collective times out marks itself as waiting, gives the others a moment to
do the same, and raises ``CollectiveTimeoutError`` naming the ranks that never arrived and what each rank
was doing. The launcher then stops the job as for any failing rank.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.distributed import Store

    from plugins.strategies.base import Strategy
    from trainer.loops.progress import LoopProgress

INTERVAL = 2.0  # seconds between heartbeats
_LIBRARY_PATHS = tuple({os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(__import__("torch").__file__))})
_OURS = (os.path.join("trainer", ""), os.path.join("plugins", ""))


class CollectiveTimeoutError(RuntimeError):
    """A collective waited longer than the strategy's timeout; the message names the missing ranks."""


def main_thread_location() -> str:
    """The innermost frame of the main thread outside the standard library and torch: ``name (file:line)``."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_LIBRARY_PATHS) and "site-packages" not in path and not path.startswith("<"):
            here = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else os.path.basename(path)
            return f"{frame.f_code.co_name} ({here}:{frame.f_lineno})"
        frame = frame.f_back
    return "unknown"


def _own_connection(store: Any) -> Any:
    """A connection of the heartbeat's own: a TCP store client runs one call at a time, so a beat posted on the
    main thread's connection waits behind any ``wait``/``get`` the main thread is blocked in (measured: a ``set``
    took the whole 5 s of another thread's ``wait``)."""
    try:
        return store.clone()
    except (AttributeError, NotImplementedError, RuntimeError):  # a store type without clone(): share it
        return store


class Heartbeat:
    """Posts ``{"step", "where", "since", "time"}`` for this rank to ``store`` every ``interval`` seconds."""

    def __init__(self, progress: LoopProgress, store: Store, rank: int, world_size: int, interval: float = INTERVAL,
                 ) -> None:
        import torch.distributed as dist

        self.progress, self.rank, self.world_size, self.interval = progress, rank, world_size, interval
        self.store = dist.PrefixStore("relay/heartbeat", _own_connection(store))
        self._stop = threading.Event()
        self._where, self._since = "", time.time()
        self._thread = threading.Thread(target=self._run, name="relay-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and wait for the thread: a daemon thread still inside the store's C++ call when the
        interpreter finalizes is ended by ``pthread_exit``, whose unwinding through C++ frames aborts the process
        ("terminate called without an active exception", SIGABRT after a run that succeeded)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 10)

    def record(self) -> dict[str, int | str | float]:
        where = main_thread_location()
        if where != self._where:
            self._where, self._since = where, time.time()
        return {"step": self.progress.global_step, "where": where, "since": self._since, "time": time.time()}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.store.set(str(self.rank), json.dumps(self.record()))
            except Exception:  # the store's host is gone: the run is ending anyway
                return
            self._stop.wait(self.interval)

    # --- after a timeout ------------------------------------------------------------------------
    def explain(self, error: BaseException, timeout: float) -> str:
        """Mark this rank as waiting, wait briefly for the other waiters, and describe every rank."""
        self.stop()
        store = self.store
        try:
            store.set(f"waiting/{self.rank}", "1")
        except Exception:
            return ""
        deadline = time.monotonic() + 2 * self.interval + 1
        others = [r for r in range(self.world_size) if r != self.rank]
        waiting = {self.rank}
        while time.monotonic() < deadline:
            waiting |= {r for r in others if store.check([f"waiting/{r}"])}
            if len(waiting) == self.world_size:
                break
            time.sleep(0.2)
        missing = [r for r in range(self.world_size) if r not in waiting]
        beats = {}
        for r in range(self.world_size):
            try:
                beats[r] = json.loads(store.get(str(r))) if store.check([str(r)]) else None
            except Exception:
                beats[r] = None
        now = time.time()

        def describe(r: int) -> str:
            beat = beats.get(r)
            if beat is None:
                return f"rank {r}: no heartbeat (it never got past start-up, or its host is gone)"
            return (f"rank {r}: step {beat['step']}, in {beat['where']} for {now - beat['since']:.0f} s "
                    f"(last heartbeat {now - beat['time']:.0f} s ago)")

        if missing:
            who = ", ".join(map(str, missing))
            head = (f"a collective on rank {self.rank} waited {timeout:.0f} s (the strategy's timeout) for rank{'s' if len(missing) > 1 else ''} "
                    f"{who}, which never arrived")
        else:
            head = f"a collective on rank {self.rank} timed out after {timeout:.0f} s although every rank reached one"
        states = "; ".join(describe(r) for r in range(self.world_size))
        return (f"{head}. What each rank was doing: {states}. If that work is legitimately slow, raise the "
                f"strategy's timeout (e.g. DDPStrategy(timeout=900), or strategy.timeout=900).")


def _is_timeout(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, RuntimeError) and ("timed out" in text or "timeout" in text)


@contextmanager
def watch_ranks(strategy: Strategy, progress: LoopProgress) -> Iterator[None]:
    """Around a stage's loop: the training timeout, the heartbeat, and a named culprit when a collective times out."""
    strategy.begin_training()
    store = getattr(strategy, "store", None)
    heartbeat = None
    if store is not None and strategy.world_size > 1:
        heartbeat = Heartbeat(progress, store, strategy.global_rank, strategy.world_size)
        heartbeat.start()
    try:
        yield
    except RuntimeError as error:
        if heartbeat is None or not _is_timeout(error):
            raise
        message = heartbeat.explain(error, strategy.timeout.total_seconds())
        if not message:
            raise
        raise CollectiveTimeoutError(message) from None
    finally:
        if heartbeat is not None:
            heartbeat.stop()
