"""Quieting warnings that are about choices a user made on purpose."""

from __future__ import annotations

import warnings


class PossibleUserWarning(UserWarning):
    """A warning about something that may be intended (few dataloader workers, a small log interval...)."""


def disable_possible_user_warnings(module: str = "") -> None:
    """Ignore every ``PossibleUserWarning`` (from ``module``, a regex, when given)."""
    warnings.filterwarnings("ignore", category=PossibleUserWarning, module=module)


__all__ = ["PossibleUserWarning", "disable_possible_user_warnings"]
