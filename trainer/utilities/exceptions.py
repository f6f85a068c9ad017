"""Lightning's exception names; Relay's own errors subclass them, so ``except`` clauses keep working."""

from __future__ import annotations

from trainer.errors import MisconfigurationError, MisconfigurationException


class SIGTERMException(SystemExit):
    """Raised when a process receives SIGTERM during a run."""


class _TunerExitException(Exception):
    """Raised by the tuner's callbacks to end the Trainer call once the tuner has its answer (not an error)."""


__all__ = ["MisconfigurationError", "MisconfigurationException", "SIGTERMException"]
