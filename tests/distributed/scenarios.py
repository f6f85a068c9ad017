"""``script.py OUT ARGS... --then OUT2 ARGS2... --then ...``: several scenarios of one launched test script.

The scenarios run one after another in the same processes: one launch, and the workers (and their process group)
are reused by each scenario's Trainer, so they must all use the same number of processes. A scenario that fails
ends the program: only the last one may fail on purpose. Imported by the scripts next to it (``import scenarios``
works from ``python tests/distributed/<script>.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator


def scenarios(argv: list[str] | None = None) -> Iterator[list[str]]:
    """The argument lists of the scenarios of ``argv`` (default: the program's own)."""
    scenario: list[str] = []
    for arg in [*(sys.argv[1:] if argv is None else argv), "--then"]:
        if arg == "--then":
            yield scenario
            scenario = []
        else:
            scenario.append(arg)
