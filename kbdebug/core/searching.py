"""Searches with a compiled RE2 pattern at the cost of the search itself.

The RE2 binding's `search` and `finditer` run a Python generator for every call: the text encoded to UTF-8, each
match's byte offsets mapped back to characters, a match object built. That is five microseconds a call where the
engine takes one, and the readers and the match stage ask it thousands of times a log for a yes or no, or for
where some fixed texts start. Here the engine is asked directly: whether there is a match at all, and the starts
of the matches in a text of ASCII characters only (whose byte offsets are its character offsets). A pattern of
Python's engine (where RE2 is not installed), or a binding without these internals, is searched as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

try:
    import re2 as _re2  # type: ignore[import-untyped]

    _UNANCHORED: Any = _re2._Anchor.UNANCHORED
    _NO_MATCH: Any = _re2._NULL_SPAN
    _probe = _re2.compile("b")._regexp  # the engine answers as this module reads it: a span, or the empty one
    if _probe.Match(_UNANCHORED, b"ab", 0, 2)[0] != (1, 2) or _probe.Match(_UNANCHORED, b"a", 0, 1)[0] != _NO_MATCH:
        raise AttributeError("an RE2 binding built otherwise")
except Exception:  # pragma: no cover - no binding, or one built otherwise: every search goes through the binding
    _UNANCHORED = _NO_MATCH = None


def _engine(rx: Any) -> Any:
    """The RE2 object behind a compiled pattern, or None (Python's engine, or a binding without one)."""
    return getattr(rx, "_regexp", None) if _UNANCHORED is not None else None


def finds(rx: Any, text: str) -> bool:
    """Whether `rx` matches somewhere in `text`: `rx.search(text) is not None`."""
    engine = _engine(rx)
    if engine is None:
        return rx.search(text) is not None
    data = text.encode("utf-8")
    return bool(engine.Match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)


def starts(rx: Any, text: str) -> Iterator[int]:
    """Where each match of `rx` in `text` starts, in order: `m.start() for m in rx.finditer(text)`."""
    engine = _engine(rx)
    if engine is None or not text.isascii():
        yield from (m.start() for m in rx.finditer(text))
        return
    data = text.encode("ascii")
    pos, end = 0, len(data)
    while True:  # as the binding's finditer steps: past each match, one character past an empty one
        span = engine.Match(_UNANCHORED, data, pos, end)[0]
        if span == _NO_MATCH:
            return
        yield span[0]
        if pos == end:
            return
        pos = pos + 1 if pos == span[1] else span[1]
