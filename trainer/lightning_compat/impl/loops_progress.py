"""Lightning's loop progress trackers (``lightning.pytorch.loops.progress``) and its ``_Loop`` base.

How the names of this part are served (the rule every ``impl/loops_*.py`` file keeps):
1. a helper with defined behaviour is Relay's own code with Lightning's signature and observable behaviour;
2. an engine class Relay has a counterpart of is that counterpart (or a small adapter over it);
3. an engine internal with no Relay counterpart imports everywhere and raises, when built or called, an error
   naming what Relay does instead (and is listed in ``surface/exceptions.py``).

The trackers here are rule 1: plain counters with ``state_dict``/``load_state_dict``, the shapes Lightning's
checkpoints and callbacks read. They are defined once, in ``trainer/loops/trackers.py``: Relay's loops hold and
advance them, so the objects code written against Lightning builds, subclasses and compares are the ones the Trainer
counts with. ``_Loop`` is the base class Lightning's loops share (restart flags and a state dict made of the progress
objects and child loops it holds).
"""

from __future__ import annotations

from trainer.loops.trackers import (  # noqa: F401  (Relay's loops keep these: the one definition)
    _BaseProgress, _ReadyCompletedTracker, _StartedTracker, _ProcessedTracker, _Progress,
    _BatchProgress, _SchedulerProgress, _OptimizerProgress, _OptimizationProgress, _Loop,
)

__all__ = ["_BaseProgress", "_ReadyCompletedTracker", "_StartedTracker", "_ProcessedTracker", "_Progress",
           "_BatchProgress", "_SchedulerProgress", "_OptimizerProgress", "_OptimizationProgress", "_Loop"]
