"""How a built lark parser is kept between runs: the speed-up of loading a grammar, apart from what the
grammars mean (kbdebug.parse.grammar).

Lark's own `cache=True` is LALR-only. An Earley parser pickles once modules travel by name and its terminals
travel as text: plain text is found with `str.startswith` and never compiled, a regex is compiled the first
time the parser tries it. An LALR parser travels as lark's own serialised tables.
"""

from __future__ import annotations

import copyreg
import importlib
import io
import pickle
import re
import sys
import types

from lark import Lark


def dumps(obj: Lark) -> bytes:
    """An Earley parser as bytes (without the grammar as lark read it: only building needs that)."""
    if obj.options.parser == "lalr":
        buf = io.BytesIO()
        obj.save(buf)
        return buf.getvalue()
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[types.ModuleType] = lambda m: (importlib.import_module, (m.__name__,))
    pickler.dispatch_table[re.Pattern] = lambda rx: (terminal, (rx.pattern, rx.flags))
    # The grammar as lark read it (its rule trees: a third of the pickle) is needed only to build the parser.
    built, obj.grammar = obj.grammar, None  # type: ignore[assignment]
    try:
        pickler.dump(obj)
    finally:
        obj.grammar = built
    return buf.getvalue()


def terminal(pattern: str, flags: int) -> LazyRegex:
    """An unpickled Earley parser's terminal: plain text (most of messages.lark's are) is found with
    `str.startswith`, never compiled; a regex is compiled the first time the parser tries it."""
    text = _UNESCAPE.sub(r"\1", pattern)
    if not flags & ~re.UNICODE and re.escape(text) == pattern:
        return Literal(pattern, flags, text)
    return LazyRegex(pattern, flags)


_UNESCAPE = re.compile(r"\\(.)", re.S)


class LazyRegex:
    """A terminal's regex, compiled on first use. Unpickling compiled all of messages.lark's 150
    terminals, a third of loading it, and one message meets half of them at most. After the first
    call `match` is the compiled pattern's own."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | Found | None:
        self.match = re.compile(self.pattern, self.flags).match  # type: ignore[method-assign]
        return self.match(string, pos, endpos)

    def __getattr__(self, name: str) -> object:  # whatever else lark asks of a pattern
        return getattr(re.compile(self.pattern, self.flags), name)

    def __reduce__(self) -> tuple[object, tuple[str, int]]:
        return (terminal, (self.pattern, self.flags))


class Literal(LazyRegex):
    def __init__(self, pattern: str, flags: int, text: str) -> None:
        super().__init__(pattern, flags)
        self.text = text

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Found | None:
        return Found(string, pos, pos + len(self.text)) if string.startswith(self.text, pos, endpos) else None


class Found:
    """What lark reads of a match (`group(0)`, `end()`), for a terminal found as plain text."""

    __slots__ = ("string", "_start", "_end")

    def __init__(self, string: str, start: int, end: int) -> None:
        self.string, self._start, self._end = string, start, end

    def group(self, index: int = 0) -> str:
        if index:
            raise IndexError("no such group")
        return self.string[self._start : self._end]

    def start(self, index: int = 0) -> int:
        return self._start

    def end(self, index: int = 0) -> int:
        return self._end

    def span(self, index: int = 0) -> tuple[int, int]:
        return self._start, self._end


def loads(data: bytes, lalr: bool) -> Lark:
    """A parser written by `dumps`."""
    return Lark.load(io.BytesIO(data)) if lalr else pickle.loads(data)
