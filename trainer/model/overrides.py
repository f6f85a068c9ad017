"""Which hooks the Trainer must call: the ones a subclass overrides, and any set on the instance itself.

``subclass_overrides`` is ``lightning_utilities``' ``is_overridden`` (it unwraps ``functools.wraps``/``partial``
wrappers and ``Mock(wraps=...)``), written here because a plain fit asks it a few dozen times and importing
``lightning_utilities`` imports ``packaging`` (0.07 G instructions, a quarter of ``from trainer import Trainer``).
Because it unwraps, a hook patched on an instance (the usual way to trace, time or patch one) looks like the base
method and would be skipped; Lightning calls whatever attribute a callback or module has, so ``is_overridden`` counts
anything in the instance's ``__dict__``.
"""

from __future__ import annotations

from functools import partial
from unittest.mock import Mock  # imported by torch already


def subclass_overrides(name: str, instance: object, parent: type) -> bool:
    """True when ``instance.<name>``, unwrapped, is not ``parent``'s method (``lightning_utilities``' ``is_overridden``;
    a ``ValueError`` when ``parent`` has no such method)."""
    attr = getattr(instance, name, None)
    if attr is None:
        return False
    attr = getattr(attr, "__wrapped__", attr)  # functools.wraps, @contextmanager
    if isinstance(attr, Mock):
        attr = attr._mock_wraps
    elif isinstance(attr, partial):
        attr = attr.func
    if attr is None:
        return False
    base = getattr(parent, name, None)
    if base is None:
        raise ValueError("The parent should define the method")
    base = getattr(base, "__wrapped__", base)
    return attr.__code__ != base.__code__


def is_overridden(name: str, instance: object, parent: type) -> bool:
    """True when ``instance.<name>`` is not ``parent``'s own method: overridden by a subclass or set on the instance
    (set to None on the instance: not defined, as Lightning's ``is_overridden`` says)."""
    if name in getattr(instance, "__dict__", ()):
        return instance.__dict__[name] is not None
    return subclass_overrides(name, instance, parent)
