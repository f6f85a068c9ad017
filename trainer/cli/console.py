"""What the console shows, also kept in ``<run dir>/relay.log``.

Python-level tee of ``sys.stdout``/``sys.stderr`` (prints, the progress bar, warnings, tracebacks that
reach the top); the terminal still sees everything exactly as before. Hydra's own file logging writes
its log records to the same file.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

LOG_NAME = "relay.log"


class Tee:
    """A text stream that writes to the console stream and to a file; everything else is the console's."""

    def __init__(self, console: TextIO, file: TextIO) -> None:
        self._console = console
        self._file = file

    def write(self, text: str) -> int:
        n = self._console.write(text)
        if not self._file.closed:
            self._file.write(text)
        return n

    def flush(self) -> None:
        self._console.flush()
        if not self._file.closed:
            self._file.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the console's
        return getattr(self._console, name)


@contextlib.contextmanager
def console_to_log(run_dir: str | Path) -> Iterator[Path]:
    """Copy this process's console output to ``<run_dir>/relay.log`` (appended) while the block runs."""
    path = Path(run_dir) / LOG_NAME
    saved = sys.stdout, sys.stderr
    with open(path, "a", encoding="utf-8", buffering=1) as file:
        sys.stdout, sys.stderr = Tee(saved[0], file), Tee(saved[1], file)
        try:
            yield path
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved
