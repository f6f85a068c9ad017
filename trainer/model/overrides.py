"""Which hooks the Trainer must call: the ones a subclass overrides, and any set on the instance itself.

``lightning_utilities``' ``is_overridden`` unwraps ``functools.wraps``/``partial`` wrappers, so a hook patched on an
instance (the usual way to trace, time or patch one) looks like the base method and would be skipped. Lightning
calls whatever attribute a callback or module has, so anything in the instance's ``__dict__`` counts here.
"""

from __future__ import annotations

from typing import Any

from lightning_utilities.core.overrides import is_overridden as _subclass_overrides


def is_overridden(name: str, instance: Any, parent: type) -> bool:
    """True when ``instance.<name>`` is not ``parent``'s own method: overridden by a subclass or set on the instance
    (set to None on the instance: not defined, as Lightning's ``is_overridden`` says)."""
    if name in getattr(instance, "__dict__", ()):
        return instance.__dict__[name] is not None
    return _subclass_overrides(name, instance, parent)
