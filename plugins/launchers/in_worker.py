"""What a worker process does about the launcher that started it: die with it, and record an uncaught error
where the elastic agent reads it. Apart from ``elastic.py`` so that a process that is not a worker (every plain
run checks) imports none of the launch machinery."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from plugins.launchers.base import first_line

LAUNCHER_PID = "RELAY_LAUNCHER_PID"  # set for the workers: the process they must not outlive
FORKED_FROM: list[int] = []  # in a worker the forkserver's zygote forked: the zygote's pid (it must not outlive it)


def forked_from() -> int | None:
    """The forkserver's pid in a worker it forked (``watch_launcher`` watches it: it dies with the launcher)."""
    return FORKED_FROM[0] if FORKED_FROM else None


def watch_launcher(env: dict[str, str] | None = None, interval: float = 0.5) -> bool:
    """In a worker Relay's launcher started: a daemon thread that kills this process when the launcher dies.

    Backs up the parent-death signal the worker got at start (``orphan_guard.py``): the worker must never
    train on unsupervised, writing checkpoints that race a resumed job. A worker forked by the launch's
    forkserver watches the forkserver, its parent, which dies with the launcher. Returns whether it watches.
    """
    value = (os.environ if env is None else env).get(LAUNCHER_PID)
    if not value or not value.isdigit() or any(t.name == "relay-launcher-watchdog" for t in threading.enumerate()):
        return False
    parent = os.getppid()
    if parent not in (int(value), forked_from()):  # inherited by a process the worker started (a subprocess, a
        return False                              # Spark or Ray task): its parent's death is not the launcher's

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="relay-launcher-watchdog", daemon=True).start()
    return True


def record_failures() -> None:
    """In a worker: an uncaught error is also written to the file the elastic agent names for this worker
    (``TORCHELASTIC_ERROR_FILE``, torch's format), so the launcher's one line can say what went wrong.

    The error of a rank that only saw another rank go away is not recorded (``report_peer_failures_briefly``
    handles those before this hook): the launcher then names the rank whose error started it.
    """
    if not os.environ.get("TORCHELASTIC_ERROR_FILE") or _RECORDING:
        return
    _RECORDING.append(True)  # once per process: a later stage must not wrap the peer-failure hook
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        # torch's ``@record`` may have written a fuller file already: keep it
        if not issubclass(kind, (KeyboardInterrupt, SystemExit)) and not os.path.exists(
                os.environ.get("TORCHELASTIC_ERROR_FILE", "")):
            import traceback

            record_failure(first_line(value), "".join(traceback.format_exception(kind, value, tb)))
        previous(kind, value, tb)

    sys.excepthook = hook


_RECORDING: list[bool] = []


def record_failure(message: str, callstack: str = "") -> None:
    """Write ``message`` (and the traceback, which torchrun's failure summary prints) as this worker's failure
    for the elastic agent (no-op outside one)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    import json

    data = {"message": {"message": message,
                        "extraInfo": {"py_callstack": callstack, "timestamp": str(int(time.time()))}}}
    try:
        with open(path, "w") as fp:
            json.dump(data, fp)
    except OSError:
        pass


