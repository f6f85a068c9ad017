"""Preemption: a signal (SIGTERM, SIGUSR1 by default) becomes "finish this step, checkpoint, exit".

Clusters announce the end of a job with a signal: SLURM sends ``--signal=SIGUSR1@90`` before the time
limit and SIGTERM on preemption, Kubernetes sends SIGTERM to the pod (torchrun's agent forwards it to
the workers), and Relay's own launcher forwards SIGTERM and SIGUSR1 to its workers. The handler only sets
a flag. The fit loop votes on it with the other ranks (the same vote as ``should_stop``), so every rank
stops after the same step; then every rank writes ``last.ckpt`` in the run's checkpoint directory, rank 0
leaves a note naming it (so the next ``fit`` of this run resumes from it without ``ckpt_path``), under
SLURM asks for a requeue (``scontrol requeue $SLURM_JOB_ID``), and the process exits with
``128 + signal number`` (143 for SIGTERM, 138 for SIGUSR1), the code a shell reports for a process
ended by that signal, which Kubernetes' ``restartPolicy: ExitCode`` treats as retryable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from trainer.errors import MisconfigurationError
from trainer.utilities.exceptions import SIGTERMException

if TYPE_CHECKING:
    from types import FrameType

    from trainer.callbacks.model_checkpoint import ModelCheckpoint
    from trainer.trainer import Trainer

DEFAULT_SIGNALS = ("SIGTERM", "SIGUSR1")
NOTE = "preempted.json"  # in the checkpoint directory: which checkpoint the next start resumes from


class Preempted(SIGTERMException):
    """Raised once the preemption checkpoint is written; the process exits with ``128 + signal``. It is a
    ``SIGTERMException`` (a ``SystemExit``), so code that catches Lightning's exception for a terminated run does."""


def parse_signals(value: Any) -> tuple[signal.Signals, ...]:
    """``Trainer(preemption_signals=...)``: names or numbers; None: SIGTERM and SIGUSR1; [] or False: off."""
    if value is None or value is True:
        value = DEFAULT_SIGNALS
    if value is False:
        return ()
    items = [value] if isinstance(value, (str, int)) else list(value) if isinstance(value, Iterable) else [value]
    out = []
    for item in items:
        try:
            if isinstance(item, str):
                name = item.upper()
                out.append(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
            else:
                out.append(signal.Signals(item))
        except (KeyError, ValueError, TypeError):
            raise MisconfigurationError(
                f"Trainer(preemption_signals={value!r}): {item!r} is not a signal; use names such as "
                "['SIGTERM', 'SIGUSR1'] (the default), or [] to turn preemption handling off."
            ) from None
        if out[-1] in (signal.SIGKILL, signal.SIGSTOP):
            raise MisconfigurationError(f"Trainer(preemption_signals={value!r}): {out[-1].name} cannot be caught.")
    return tuple(dict.fromkeys(out))


class PreemptionHandler:
    """Sets ``requested`` when one of ``signals`` arrives while installed (in the main thread only)."""

    def __init__(self, signals: tuple[signal.Signals, ...]) -> None:
        self.signals = signals
        self.received: signal.Signals | None = None  # the first one: what the run acts on
        self.seen: set[signal.Signals] = set()  # every one that arrived (``Trainer.received_sigterm`` asks)
        self._previous: dict[signal.Signals, Any] = {}

    @property
    def requested(self) -> bool:
        return self.received is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.seen.add(signal.Signals(signum))
        if self.received is None:
            self.received = signal.Signals(signum)
        previous = self._previous.get(signal.Signals(signum))
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)  # a handler the program set before the run still runs (Lightning's rule)

    def install(self) -> None:
        if not self.signals or threading.current_thread() is not threading.main_thread():
            return
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    @property
    def exit_code(self) -> int:
        return 128 + int(self.received or signal.SIGTERM)


@contextmanager
def guarded_fit(handler: PreemptionHandler, detect_anomaly: bool, note_dirs: Callable[[], Iterable[Path]],
                is_global_zero: bool) -> Iterator[None]:
    """Around the fit loop: the preemption handler, anomaly detection; the resume note (in ``note_dirs()``, this
    run's checkpoint directories at the end) cleared on success.

    A signal that arrives too late to act on (after the last step) is not swallowed: it is raised again
    once the previous handlers are back. The handler stays on the Trainer, uninstalled, until its next call
    starts, so ``trainer.received_sigterm`` still answers after the fit."""
    import torch

    handler.install()
    finished = False
    try:
        with torch.autograd.set_detect_anomaly(detect_anomaly):
            yield
        finished = True
    finally:
        handler.uninstall()
    if finished:
        if is_global_zero:
            clear_resume_note(note_dirs())
        if handler.received is not None:
            signal.raise_signal(handler.received)


def received(trainer: Trainer, sig: signal.Signals) -> bool:
    """Whether ``sig`` arrived while the current (or last) fit of ``trainer`` had its handler installed."""
    handler = trainer.stage_run.preemption
    return handler is not None and sig in handler.seen


def checkpoint_dir(callback: ModelCheckpoint | None, default_root_dir: str) -> Path:
    """Where a preempted fit writes ``last.ckpt``: the checkpoint callback's directory, else the run's default."""
    if callback is not None and callback.dirpath:
        return Path(callback.dirpath)
    return Path(default_root_dir) / "checkpoints"


def fit_signals(signals: tuple[signal.Signals, ...], environment: object) -> tuple[signal.Signals, ...]:
    """The signals a fit handles: ``Trainer(preemption_signals=...)``'s, and a ``SLURMEnvironment``'s
    ``requeue_signal`` when it requeues (Lightning's ``SLURMEnvironment(auto_requeue=True, requeue_signal=...)``)."""
    extra = getattr(environment, "requeue_signal", None) if getattr(environment, "auto_requeue", False) else None
    return tuple(dict.fromkeys([*signals, signal.Signals(extra)])) if extra is not None else signals


def requeues(auto_requeue: bool, environment: object) -> bool:
    """``Trainer(auto_requeue=...)``, unless the cluster environment says not to (``SLURMEnvironment(auto_requeue=
    False)``)."""
    return auto_requeue and getattr(environment, "auto_requeue", True) is not False


class PreemptionExit(NamedTuple):
    """What ending a preempted fit needs from the run: where and how to save, the step, who writes the note."""

    directory: Path
    save: Callable[[Path], None]  # every rank: ``Trainer.save_checkpoint``
    step: int
    is_global_zero: bool
    auto_requeue: bool
    barrier: Callable[[str], None]


def checkpoint_and_exit(handler: PreemptionHandler, run: PreemptionExit) -> None:
    """Every rank: write ``last.ckpt``; rank 0: the resume note and the SLURM requeue; then exit."""
    sig = handler.received.name if handler.received is not None else "a preemption signal"
    path = run.directory / "last.ckpt"
    if run.is_global_zero:
        print(f"relay: {sig} received; stopped after step {run.step}, saving {path}", file=sys.stderr, flush=True)
    run.save(path)
    if run.is_global_zero:
        note = run.directory / NOTE
        tmp = note.with_name(f".{NOTE}.relaytmp-{os.getpid()}")
        tmp.write_text(json.dumps({"checkpoint": str(path), "global_step": run.step, "signal": sig}))
        os.replace(tmp, note)
        if run.auto_requeue:
            requeue_slurm_job()
    run.barrier("preempted")
    raise Preempted(handler.exit_code)


def requeue_slurm_job(env: dict[str, str] | None = None) -> bool:
    """``scontrol requeue $SLURM_JOB_ID`` inside a SLURM batch job; one line on what happened."""
    env = dict(os.environ if env is None else env)
    job = env.get("SLURM_ARRAY_JOB_ID") and f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID', '')}"
    job = job or env.get("SLURM_JOB_ID")
    if not job or env.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return False
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as err:
        print(f"relay: could not requeue SLURM job {job}: {err}", file=sys.stderr, flush=True)
        return False
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[:1]
        print(f"relay: scontrol requeue {job} failed ({reason[0] if reason else done.returncode}); submit the job "
              "again to resume (the checkpoint is saved).", file=sys.stderr, flush=True)
        return False
    print(f"relay: requeued SLURM job {job}; it resumes from the checkpoint when it starts again.", file=sys.stderr,
          flush=True)
    return True


def resume_note(dirs: Iterable[Path | str]) -> str | None:
    """The checkpoint a preempted earlier start of this run left (in one of its checkpoint ``dirs``) for the next
    one, if it is still there."""
    for directory in dirs:
        if isinstance(directory, str):  # an fsspec URL: resume notes are local files only
            continue
        note = directory / NOTE
        try:
            saved = json.loads(note.read_text())
        except (OSError, ValueError):
            continue
        path = saved.get("checkpoint") if isinstance(saved, dict) else None
        if isinstance(path, str) and Path(path).exists():
            return path
    return None


def clear_resume_note(dirs: Iterable[Path]) -> None:
    """A run that finished does not resume its preempted past again (global rank 0 calls this)."""
    for directory in dirs:
        try:
            (directory / NOTE).unlink()
        except (OSError, TypeError):  # TypeError: an fsspec URL (a string), which holds no note
            pass
