"""The two ``lightning_utilities`` helpers a plain fit runs are Relay's own (importing the library imports
``packaging``, a quarter of ``from trainer import Trainer``'s start-up): ``trainer.states.StrEnum`` and
``trainer.model.overrides.subclass_overrides``. Checked here against the library's, case by case, so they behave
as the library does."""

from __future__ import annotations

import functools
import warnings
from unittest.mock import Mock

import pytest
from lightning_utilities.core.enums import StrEnum as LibraryStrEnum
from lightning_utilities.core.overrides import is_overridden as library_is_overridden

from trainer.model.overrides import subclass_overrides
from trainer.states import StrEnum


def _enums():
    class Ours(StrEnum):
        FITTING = "fit"
        VALIDATING = "validate"

    class Theirs(LibraryStrEnum):
        FITTING = "fit"
        VALIDATING = "validate"

    return Ours, Theirs


@pytest.mark.parametrize("other", ["fit", "FIT", "Fit", "validate", "x", ""])
def test_str_enum_equality_and_hash_match_the_library(other):
    ours, theirs = _enums()
    assert (ours.FITTING == other) == (theirs.FITTING == other)
    assert (hash(ours.FITTING) == hash(other.lower())) == (hash(theirs.FITTING) == hash(other.lower()))
    assert (ours.FITTING == theirs.FITTING) and (theirs.FITTING == ours.FITTING)


@pytest.mark.parametrize(("value", "source"), [("fitting", "key"), ("FITTING", "key"), ("fit", "value"),
                                               ("fit", "any"), ("validating", "any"), ("fit", "key"),
                                               ("nope", "key"), ("nope", "value"), ("nope", "any")])
def test_str_enum_from_str_and_try_from_str_match_the_library(value, source):
    ours, theirs = _enums()

    def outcome(cls, fn):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = getattr(cls, fn)(value, source)
        except ValueError as error:
            return "ValueError", str(error)
        return (result.name if result is not None else None), [str(w.message) for w in caught]

    for fn in ("from_str", "try_from_str"):
        assert outcome(ours, fn) == outcome(theirs, fn), fn


class Base:
    def hook(self):
        return 0

    def other(self):
        return 0


class Overrides(Base):
    def hook(self):
        return 1


class Wrapped(Base):
    @functools.wraps(Base.hook)
    def hook(self):
        return Base.hook(self)


def _cases():
    plain, over = Base(), Overrides()
    mocked = Base()
    mocked.hook = Mock(wraps=mocked.hook)
    mocked_over = Overrides()
    mocked_over.hook = Mock(wraps=mocked_over.hook)
    parted = Overrides()
    parted.hook = functools.partial(Overrides.hook, parted)
    empty_mock = Base()
    empty_mock.hook = Mock()
    return {"base": plain, "override": over, "wraps": Wrapped(), "mock of base": mocked,
            "mock of override": mocked_over, "partial": parted, "mock without wraps": empty_mock}


@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("name", ["hook", "other", "missing"])
def test_subclass_overrides_matches_the_library(case, name):
    instance = _cases()[case]

    def outcome(fn):
        try:
            return fn(name, instance, Base)
        except ValueError as error:
            return f"ValueError: {error}"

    assert outcome(subclass_overrides) == outcome(library_is_overridden)


def test_the_library_is_not_imported_for_them():
    """They exist to keep the library off a plain fit's path: their modules do not import it."""
    import subprocess
    import sys

    code = ("import sys; import trainer.states, trainer.model.overrides; "
            "print(any(m.startswith('lightning_utilities') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
