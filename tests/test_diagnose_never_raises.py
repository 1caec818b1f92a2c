"""`diagnose(exc)` never raises, whatever the exception: it runs in excepthooks and `except` blocks, where an
error of its own would hide the user's. Each case is an exception users' code really raises or holds."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import kbdebug.runtime.live
from kbdebug import diagnose
from kbdebug.diagnosis import Diagnosis
from kbdebug.render import json_object


def _diagnosed(fn: Callable[[], object]) -> Diagnosis:
    with pytest.raises(BaseException) as info:
        fn()
    diag = diagnose(info.value)
    diag.render("text")
    json_object(diag)
    return diag


def test_a_recursion_error_from_an_nn_module_wrappers_getattr() -> None:
    torch = pytest.importorskip("torch")

    class Wrapper(torch.nn.Module):  # DataParallel-like: forwards unknown attributes to a `module` never set
        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.module = module

        def __getattr__(self, name: str) -> object:
            return getattr(self.module, name)

    def run() -> None:
        wrapper = Wrapper.__new__(Wrapper)  # a wrapper restored without __init__ (a pickled one, a bad copy)
        wrapper.backbone  # noqa: B018

    diag = _diagnosed(run)
    inc = diag.incidents[0]
    assert inc.rule == "other" and inc.facts["error_type"] == "RecursionError"
    assert "kbdebug_failure" not in inc.facts  # read whole: the wrapper's frame is not read past its first error


class StrRaises(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


def test_an_exception_whose_str_raises() -> None:
    def run() -> None:
        raise StrRaises

    inc = _diagnosed(run).incidents[0]
    assert inc.facts["error_type"].endswith("StrRaises") and inc.facts["error_message"] == "<exception str() failed>"


class StrRecurses(Exception):
    def __str__(self) -> str:
        raise RecursionError("loop")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_an_exception_whose_str_and_repr_raise() -> None:
    def run() -> None:
        raise StrRecurses

    assert _diagnosed(run).incidents[0].rule == "other"


def test_a_huge_message_is_read_in_bounded_time() -> None:
    def run() -> None:
        raise RuntimeError("x" * 2_000_000 + "\n" * 50_000 + "tensor([1, 2, 3])")

    inc = _diagnosed(run).incidents[0]  # bounded: the message is read as its head and tail (MAX_MESSAGE_LINES, MAX_LINE)
    assert inc.rule == "other" and inc.facts["error_type"] == "RuntimeError"
    assert len(inc.facts["error_message"]) <= kbdebug.runtime.live.MAX_LINE


@pytest.mark.parametrize("link", ["__context__", "__cause__"])
def test_a_cyclic_chain(link: str) -> None:
    def run() -> None:
        a, b = ValueError("outer"), KeyError("inner")
        setattr(a, link, b)
        setattr(b, link, a)
        raise a

    inc = _diagnosed(run).incidents[0]
    assert inc.facts["error_type"] in {"ValueError", "KeyError"}


def test_a_recursion_error_of_the_users_own_code() -> None:
    def down(n: int) -> int:
        return down(n + 1)

    assert _diagnosed(lambda: down(0)).incidents[0].facts["error_type"] == "RecursionError"


def test_locals_whose_attributes_raise() -> None:
    class Hostile:
        def __getattr__(self, name: str) -> object:
            raise RuntimeError(f"no {name}")

        def __bool__(self) -> bool:
            raise RuntimeError("no truth")

    def run() -> None:
        shape = Hostile()
        shape.dims.first  # noqa: B018

    assert _diagnosed(run).incidents[0].facts["error_message"] == "no dims"


def test_an_exception_group_system_exit_and_keyboard_interrupt() -> None:
    group = getattr(__import__("builtins"), "ExceptionGroup", None)  # Python 3.11+
    if group is not None:
        assert _diagnosed(lambda: (_ for _ in ()).throw(group("many", [ValueError("a")]))).incidents
    assert _diagnosed(lambda: sys.exit(3)).incidents[0].facts["error_type"] == "SystemExit"
    assert _diagnosed(lambda: (_ for _ in ()).throw(KeyboardInterrupt())).incidents[0].facts["error_type"] == "KeyboardInterrupt"


def test_an_exception_never_raised_has_no_traceback() -> None:
    assert diagnose(ValueError("made, not raised")).incidents[0].facts["error_message"] == "made, not raised"


def test_when_reading_fails_the_error_is_still_named_with_what_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise MemoryError("out of memory while reading")

    monkeypatch.setattr(kbdebug.runtime.live, "read_exception", broken)
    inc = diagnose(KeyError("image")).incidents[0]
    assert inc.rule == "other" and inc.facts["error_type"] == "KeyError" and inc.facts["error_message"] == "'image'"
    assert inc.facts["kbdebug_failure"] == "MemoryError: out of memory while reading"
    assert inc.guide  # completed: the catch-all's guide is filled
