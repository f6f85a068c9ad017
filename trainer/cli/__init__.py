"""The Hydra command line: ``python -m trainer [overrides]``, its worker entry and ``init``.

Nothing here is imported by ``import trainer``; hydra and omegaconf load only when the CLI runs.
"""

from __future__ import annotations
