"""The allowed exceptions to "every Lightning module, name and public signature is served": each with its reason
and the test that checks what it says. ``docs/lightning_api.md`` lists them (``docs/make_lightning_api.py``);
``tests/compat/test_lightning_surface.py`` fails on a finding no exception covers, and on an exception that
covers nothing any more.

A pattern is ``fnmatch``-ed against ``module:name`` (names), ``module:name`` or ``module:Class.method``
(signatures), with the module under ``lightning.*``.
"""

from __future__ import annotations

from dataclasses import dataclass

TESTS = "tests/compat/test_lightning_surface.py"


@dataclass(frozen=True)
class Allowed:
    patterns: tuple[str, ...]
    what: str  # "names" or "signatures"
    reason: str
    test: str

    def covers(self, key: str) -> bool:
        from fnmatch import fnmatchcase

        return any(fnmatchcase(key, p) for p in self.patterns)


ALLOWED: list[Allowed] = []
