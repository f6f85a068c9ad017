"""Optional engines in tests: skipped where absent on a developer's machine, a failure in CI.

CI (``.ci/run`` sets ``RELAY_CI=1``) installs every optional engine, so a missing one there is a broken
install, never a reason to skip.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def need(module: str, why: str = "") -> None:
    """Skip the calling test when ``module`` is not importable, unless running in CI."""
    if importlib.util.find_spec(module) is not None:
        return
    message = f"{module} is not installed{': ' + why if why else ''}"
    if os.environ.get("RELAY_CI") == "1":
        pytest.fail(f"{message} (CI installs it: see .ci/run)")
    pytest.skip(message)


def need_mark(module: str, why: str = "") -> pytest.MarkDecorator:
    """The same as :func:`need`, as a decorator for a test or a module (``pytestmark = need_mark(...)``)."""
    present = importlib.util.find_spec(module) is not None
    if not present and os.environ.get("RELAY_CI") == "1":
        return pytest.mark.usefixtures()  # the test runs and fails on its import, visibly
    return pytest.mark.skipif(not present, reason=f"{module} is not installed{': ' + why if why else ''}")
