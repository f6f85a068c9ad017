"""Whether Horovod can be used here, and the one line that says how to get it: what strategy selection needs
about Horovod without importing the strategy (and the launchers and collectives it brings)."""

from __future__ import annotations

import importlib.util
import os

INSTALL_COMMAND = "python -m trainer install-horovod"


def horovod_missing_message(what: str = "strategy='horovod'") -> str:
    """One line: what needs Horovod, and the command that builds and installs it for this torch."""
    return (f"{what} needs Horovod, which is not importable in this Python (pip cannot build Horovod 0.28.1 "
            f"against torch 2.x unpatched). Build and install it with: {INSTALL_COMMAND}")


def horovod_importable(load: bool = False) -> bool:
    """Whether ``horovod.torch`` is there: found on the path (cheap, imports nothing) or, with ``load``, imported.

    ``load`` is for processes horovodrun started, which import it anyway: a Horovod built for another torch is
    found but fails to load, and then "auto" must not choose it.
    """
    if load:
        try:
            import horovod.torch  # noqa: F401
        except (ImportError, OSError):
            return False
        return True
    try:
        spec = importlib.util.find_spec("horovod")  # the top-level package only: nothing is imported
    except (ImportError, ValueError):
        return False
    locations = spec.submodule_search_locations if spec is not None else None
    return bool(locations) and any(os.path.isfile(os.path.join(loc, "torch", "__init__.py")) for loc in locations)
