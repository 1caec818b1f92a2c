"""Helpers for the tests that raise real errors and diagnose them live (`kbdebug.diagnose(exc)`)."""

from __future__ import annotations

import traceback
from collections.abc import Callable

import pytest

from kbdebug import diagnose, diagnose_text
from kbdebug.diagnosis import Incident


def printed(fn: Callable[[], object]) -> str:
    """The traceback Python prints for the error `fn` raises, as a log holds it: what `kbdebug explain` reads of the
    same error."""
    with pytest.raises(BaseException) as info:
        fn()
    return "".join(traceback.format_exception(info.value))


def read(fn: Callable[[], object]) -> Incident:
    """The root incident of the printed traceback of the error `fn` raises, read as a log (`kbdebug explain`'s view of
    it, beside `root`'s live one)."""
    diag = diagnose_text(printed(fn))
    assert diag.root is not None, "nothing diagnosed in the printed traceback"
    return diag.root


def root(fn: Callable[[], object]) -> Incident:
    """The root incident of the error `fn` raises (anything it raises: a checkpoint's EOFError included)."""
    with pytest.raises(BaseException) as info:
        fn()
    diag = diagnose(info.value)
    assert diag.incidents, "nothing diagnosed"
    return diag.incidents[0]


def guide(inc: Incident) -> str:
    """The guide's four sections as one text, for asserting on what the user reads."""
    return " ".join(str(inc.guide.get(k, "")) for k in ("what", "why", "confirm", "fix"))
