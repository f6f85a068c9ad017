"""Optional dependencies as Lightning declares them (``lightning_utilities``' ``RequirementCache``), and the error
Lightning raises when one is missing: ``ModuleNotFoundError`` with the cache's own message (the requirement and
the ``pip install`` hint)."""

from __future__ import annotations

from lightning_utilities.core.imports import RequirementCache

XLA = RequirementCache("torch_xla>=1.13", "torch_xla")
BITSANDBYTES = RequirementCache("bitsandbytes")
TRANSFORMER_ENGINE = RequirementCache("transformer_engine>=0.11.0")


def require(requirement: RequirementCache) -> None:
    """Raise what Lightning raises when ``requirement`` is not met."""
    if not requirement:
        raise ModuleNotFoundError(str(requirement))
