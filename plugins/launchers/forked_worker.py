"""A child of the forkserver (``plugins/launchers/zygote.py``) becomes the fresh ``python`` torch elastic asked for.

It takes the stand-in's streams, session, working directory and environment, sets ``sys.argv``, ``sys.orig_argv``,
``sys.path[0]``, ``__main__`` and the standard streams as CPython's start-up does, and runs the whole program from
the top. A forked child leaves with ``os._exit``, so the end of the interpreter is done here, in CPython's order: an
uncaught error printed by ``sys.excepthook`` (exit code 1), non-daemon threads joined, ``atexit`` handlers run (Relay
destroys the process group and waits for checkpoint writes there), the streams flushed.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import fcntl
import io
import os
import runpy
import signal
import sys
import threading
import traceback
import types
from dataclasses import dataclass
from importlib.machinery import BuiltinImporter, SourceFileLoader
from typing import Any, NoReturn

from plugins.launchers.forkserver import Program, pythonpath_entries
from plugins.launchers.in_worker import FORKED_FROM, forked_from  # noqa: F401 (forked_from re-exported)
from plugins.launchers.orphan_guard import die_with

SETUP_FAILED = 70  # the child could not become the worker (it prints why)
FLUSH_FAILED = 120  # CPython's exit code when the standard streams cannot be flushed at exit


@dataclass(frozen=True)
class Request:
    """One worker to fork: the program, the stand-in's request (environment, cwd, streams) and descriptors."""

    program: Program
    fields: dict[str, Any]
    fds: list[int]
    zygote: int
    pythonpath: tuple[str, ...] | None = None  # the zygote's PYTHONPATH entries after sys.path[0] (None: unknown)


def become_worker(request: Request, selector: Any, owned: list[Any]) -> NoReturn:
    """In the forked child: set up, run the program, end like the interpreter; never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if not die_with(request.zygote):  # the zygote (and so the launcher) died already
            os._exit(SETUP_FAILED)
        FORKED_FROM.append(request.zygote)
        _join_session(request.fields)
        selector.close()
        for thing in owned:
            thing.close()
        _take_descriptors(request.fields.get("fds", []), request.fds)
        os.chdir(request.fields["cwd"])
        os.environ.clear()
        os.environ.update(request.fields["env"])
        _as_fresh_interpreter(request.program, request.fields["argv"], request.pythonpath)
    except BaseException:  # noqa: BLE001 (whatever it is, the worker cannot run: say why, never return to serving)
        traceback.print_exc()
        _exit(SETUP_FAILED)
    code, interrupted = run_program(request.program)
    finish(code, interrupted)


def _join_session(fields: dict[str, Any]) -> None:
    """A new session like the stand-in's (torch elastic starts each worker with ``start_new_session``), so that a
    signal to the group reaches the worker and the processes it starts, and a terminal's Ctrl-C does not."""
    if fields.get("leader"):
        os.setsid()
        return
    with contextlib.suppress(OSError):
        os.setpgid(0, int(fields.get("pgid", 0)))


def _take_descriptors(numbers: list[int], fds: list[int]) -> None:
    """The stand-in's descriptors at their numbers, inheritable as an exec'd process has them: its stdin, stdout and
    stderr (one it had closed stays closed) and any other it inherited (the zygote checked those numbers are free)."""
    above = max([2, *numbers, *fds]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above) for fd in fds]  # out of the way of every number
    for fd in fds:
        os.close(fd)
    for number in (0, 1, 2):
        if number not in numbers:
            with contextlib.suppress(OSError):
                os.close(number)
    for number, fd in zip(numbers, moved):
        os.dup2(fd, number)
        os.close(fd)


def _as_fresh_interpreter(program: Program, orig_argv: list[str], pythonpath: tuple[str, ...] | None = None) -> None:
    """``sys.argv``, ``sys.orig_argv``, ``sys.path[0]`` and the worker's ``PYTHONPATH`` entries, a new ``__main__``
    and new standard streams, as CPython's start-up makes them; random state that a fresh process would draw anew is
    drawn anew."""
    sys.argv = list(program.argv)
    sys.orig_argv = list(orig_argv)
    if pythonpath is not None:  # None: the zygote forks only a worker with its own PYTHONPATH
        first = 0 if sys.flags.safe_path else 1
        sys.path[first:first + len(pythonpath)] = pythonpath_entries(os.environ.get("PYTHONPATH"), os.getcwd())
    if not sys.flags.safe_path:
        sys.path[0] = program.path0
    main = types.ModuleType("__main__")
    main.__annotations__ = {}
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    old = (sys.stdin, sys.stdout, sys.stderr)
    sys.stdin, sys.stdout, sys.stderr = (_fresh_stream(fd, stream) for fd, stream in enumerate(old))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
    _repoint_log_handlers({id(was): now for was, now in zip(old[1:], (sys.stdout, sys.stderr)) if now is not None})
    _redraw_random_state()


def _repoint_log_handlers(streams: dict[int, Any]) -> None:
    """A ``logging.StreamHandler`` a preloaded module made at import (torch makes dozens) holds the forkserver's
    stdout or stderr; in a fresh interpreter it would hold that interpreter's own, so it gets the new one."""
    import logging

    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values()
                                      if isinstance(x, logging.Logger))]
    for handler in {h for lg in loggers for h in lg.handlers}:
        new = streams.get(id(getattr(handler, "stream", None)))
        if isinstance(handler, logging.StreamHandler) and new is not None:
            handler.stream = new


def _fresh_stream(fd: int, old: Any) -> Any:
    """What CPython's ``create_stdio`` makes for ``fd`` (encoding and errors as this interpreter's, same environment):
    line buffered on a terminal and for stderr, write-through under ``PYTHONUNBUFFERED`` (the worker's own
    environment's: horovodrun sets it for its workers; the forkserver never runs under ``-u``)."""
    try:
        os.fstat(fd)
    except OSError:
        return None
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    write = fd != 0
    buffer = io.open(fd, "wb" if write else "rb", buffering=0 if unbuffered and write else -1, closefd=False)
    raw = buffer if isinstance(buffer, io.FileIO) else buffer.raw
    raw.name = ("<stdin>", "<stdout>", "<stderr>")[fd]  # type: ignore[misc]
    stream = io.TextIOWrapper(buffer, encoding=getattr(old, "encoding", None), errors=getattr(old, "errors", None),
                              newline="\n", line_buffering=not unbuffered and (raw.isatty() or fd == 2),
                              write_through=unbuffered)
    stream.mode = "w" if write else "r"  # type: ignore[misc]
    return stream


def _redraw_random_state() -> None:
    """``random`` reseeds itself after a fork; numpy's global generator (seeded when the zygote imported it) and
    multiprocessing's authentication key must differ per process too, as in processes started fresh."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        process.current_process().authkey = os.urandom(32)


def run_program(program: Program) -> tuple[int, bool]:
    """Run it as ``python script.py`` / ``-m module`` / ``-c code`` would: ``(exit code, ended by
    KeyboardInterrupt)``."""
    try:
        if program.module is not None:
            runpy._run_module_as_main(program.module)  # type: ignore[attr-defined]  # what `python -m` calls
        elif program.code is not None:
            _run_code(program.code)
        else:
            _run_script(program.script or "")
    except SystemExit as done:
        return _exit_code(done.code), False
    except BaseException as error:  # noqa: BLE001 (printed as an uncaught error: the worker's own traceback)
        _print_uncaught(error)
        _forget_script_file(program)
        return 1, isinstance(error, KeyboardInterrupt)
    _forget_script_file(program)
    return 0, False


def _run_script(path: str) -> None:
    """CPython's ``_PyRun_SimpleFileObject``: ``__file__`` and the loader in ``__main__``, the code compiled with the
    absolute path (as tracebacks show it)."""
    main = sys.modules["__main__"]
    main.__file__ = path
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = SourceFileLoader("__main__", path)
    with open(path, "rb") as fp:
        source = fp.read()
    exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)  # noqa: S102 (the user's own program)


def _run_code(code: str) -> None:
    """CPython's ``-c``: the code compiled as ``<string>`` and run in ``__main__``, whose loader is BuiltinImporter."""
    main = sys.modules["__main__"]
    main.__loader__ = BuiltinImporter
    exec(compile(code, "<string>", "exec", dont_inherit=True), main.__dict__)  # noqa: S102 (the program's own code)


def _forget_script_file(program: Program) -> None:
    """CPython removes ``__file__``/``__cached__`` from a script's ``__main__`` when it returns or raises (the atexit
    handlers do not see them); ``sys.exit`` ends the interpreter before that, and ``-m`` keeps them."""
    if program.script is not None:
        for name in ("__file__", "__cached__"):
            sys.modules["__main__"].__dict__.pop(name, None)


def _exit_code(code: Any) -> int:
    """``SystemExit.code`` as CPython turns it into an exit status (anything but None or an int is printed, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _print_uncaught(error: BaseException) -> None:
    """``sys.excepthook`` with the traceback from the program's first frame (this module's frames are not the
    program's), ``sys.last_*`` set, stdout flushed first: what ``PyErr_Print`` does."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    error.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, tb
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    try:
        sys.excepthook(type(error), error, tb)
    except BaseException as hook_error:  # noqa: BLE001 (CPython prints both)
        print("Error in sys.excepthook:", file=sys.stderr)
        traceback.print_exception(hook_error)
        print("\nOriginal exception was:", file=sys.stderr)
        traceback.print_exception(type(error), error, tb)


def finish(code: int, interrupted: bool) -> NoReturn:
    """The end of the interpreter (``Py_FinalizeEx``): join non-daemon threads, run atexit handlers, flush; then
    leave with ``code``, or die of SIGINT after an unhandled KeyboardInterrupt, as CPython does."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001 (CPython reports it and goes on)
        traceback.print_exc()
    atexit._run_exitfuncs()
    code = _flushed(code)
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _exit(code: int) -> NoReturn:
    os._exit(_flushed(code))


def _flushed(code: int) -> int:
    """Flush the standard streams: ``code``, or CPython's 120 when that fails."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001
            code = FLUSH_FAILED
    return code
