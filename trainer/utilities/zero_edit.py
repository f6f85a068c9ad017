"""Whether this process runs Lightning code through the zero-edit mode (``python -m trainer.lightning_compat``).

Where Relay's own API chose a safer or richer default than Lightning's (stop on a non-finite loss, ``relay_logs``,
keeping the latest k checkpoints without a metric), Lightning's choice holds in that mode: the code was written
against it.
"""

from __future__ import annotations

import os

COMPAT_ENV = "RELAY_LIGHTNING_COMPAT"  # set by `python -m trainer.lightning_compat`, inherited by child processes


def lightning_defaults() -> bool:
    """True in the zero-edit mode: Lightning's defaults and refusals apply where Relay's differ."""
    return os.environ.get(COMPAT_ENV) == "1"
