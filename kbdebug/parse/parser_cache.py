"""How a built lark parser is kept between runs: the speed-up of loading a grammar, apart from what the
grammars mean (kbdebug.parse.grammar).

Lark's own `cache=True` is LALR-only. An Earley parser pickles once modules travel by name and its terminals
travel as text: plain text is found with `str.startswith` and never compiled, a regex is compiled the first
time the parser tries it. An LALR parser is pickled the same way (its actions by name).

LALR parsers also travel with the grammars: each format folder's `parsers.json` holds the tables of the LALR
parsers built on its grammars (`python -m kbdebug.parse` writes them), as JSON, keyed by the very text they were
built from and lark's version. Building one costs 15-30 ms, reading its tables 3-4 ms: a run with no cache (a
first run, CI, a read-only home, `KBDEBUG_NO_CACHE=1`) pays that for each format its log holds. An edited
grammar's tables no longer match its text and it is built again, as it would be with no file at all.
"""

from __future__ import annotations

import copyreg
import hashlib
import importlib
import io
import json
import pickle
import re
import sys
import types
from functools import cache
from pathlib import Path
from typing import Any

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef
from lark.parsers import lalr_analysis

from kbdebug import _regex_cache


def dumps(obj: Lark) -> bytes:
    """A parser as bytes (without the grammar as lark read it: only building needs that). An LALR parser is
    pickled whole too: lark's own `save`/`load` rebuilds its tables and its contextual lexer in Python, 18-28 ms
    for the messages' whole-grammar reader against 4 ms to unpickle it; its actions (`Shift`, `Reduce`) are
    compared by identity, so they travel as lark's own by name."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[types.ModuleType] = lambda m: (importlib.import_module, (_READ_AS.get(m.__name__, m.__name__),))
    pickler.dispatch_table[re.Pattern] = lambda rx: (terminal, (rx.pattern, rx.flags))
    pickler.dispatch_table[lalr_analysis.Action] = lambda action: (getattr, (lalr_analysis, action.name))
    # The grammar as lark read it (its rule trees: a third of the pickle) is needed only to build the parser
    # (one read from shipped tables has none).
    built = obj.__dict__.pop("grammar", None)
    try:
        pickler.dump(obj)
    finally:
        if built is not None:
            obj.grammar = built
    return buf.getvalue()


# The modules a parser is read back with in the place of those it was built with: its lexers compile their
# patterns with `re` (one alternation per parser state, the first time the state is met), and
# kbdebug._regex_cache is `re` with the compiled programs kept between runs.
_READ_AS = {"re": "kbdebug._regex_cache"}


def terminal(pattern: str, flags: int) -> LazyRegex:
    """An unpickled Earley parser's terminal: plain text (most of messages.lark's are) is found with
    `str.startswith`, never compiled; a regex is compiled the first time the parser tries it."""
    text = _UNESCAPE.sub(r"\1", pattern)
    if not flags & ~re.UNICODE and re.escape(text) == pattern:
        return Literal(pattern, flags, text)
    return LazyRegex(pattern, flags)


_UNESCAPE = _regex_cache.compile(r"\\(.)", re.S)


class LazyRegex:
    """A terminal's regex, compiled on first use. Unpickling compiled all of messages.lark's 150
    terminals, a third of loading it, and one message meets half of them at most. After the first
    call `match` is the compiled pattern's own."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | Found | None:
        self.match = _regex_cache.compile(self.pattern, self.flags).match  # type: ignore[method-assign]
        return self.match(string, pos, endpos)

    def __getattr__(self, name: str) -> object:  # whatever else lark asks of a pattern
        return getattr(_regex_cache.compile(self.pattern, self.flags), name)

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
    """A parser written by `dumps` (`lalr` says which kind the caller expects: a pickle of the other is refused)."""
    parser = pickle.loads(data)
    if not isinstance(parser, Lark) or (parser.options.parser == "lalr") != lalr:
        raise ValueError("not a parser of the kind asked for")
    return parser


SHIPPED = "parsers.json"  # in each format folder
TABLES = "tables-1"  # the shape this code writes the tables in: raise it when that changes


def table_key(text: str, common: str) -> str:
    """What a shipped parser was built from: the grammar text as given to lark (line ends as in the wheel), the
    shared terminals it imports, and lark's version (its own `common` grammar and its tables' shape)."""
    whole = f"{TABLES}|{lark.__version__}|{text}|{common}".replace("\r\n", "\n")
    return hashlib.sha256(whole.encode()).hexdigest()[:20]


@cache
def shipped_file(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / SHIPPED).read_text(encoding="utf-8"), object_hook=_decoded)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def shipped_entries(folder: Path) -> dict[str, Any]:
    """The entries of `folder`'s parsers.json as written (their tables still encoded): what regenerating keeps."""
    try:
        data = json.loads((folder / SHIPPED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def shipped(folder: Path, parser_id: str, key: str) -> Lark | None:
    """The LALR parser `parser_id` (`grammar:start`) from the tables shipped in `folder`, when they were built from
    what `key` says (`table_key`); None otherwise, or when they cannot be read (a damaged file costs the build)."""
    entry = shipped_file(folder).get(parser_id)
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    try:
        return Lark.load(entry["tables"])
    except Exception:  # whatever a hand-edited or truncated file holds: the parser is built instead
        return None


def tables(parser: Lark) -> Any:
    """An LALR parser's tables as JSON (what `shipped` reads back)."""
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data["options"] = {**data["options"], "import_paths": []}  # a checkout's own paths: loading needs none
    return _encode({"data": data, "memo": memo})


# lark's tables hold tuples and dicts keyed by numbers: JSON has neither, so they travel tagged.
_TUPLE, _ITEMS = "\u0000tuple", "\u0000items"


def _encode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _encode(v) for k, v in obj.items()}
        return {_ITEMS: [[_encode(k), _encode(v)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {_TUPLE: [_encode(v) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise TypeError(f"cannot ship a {type(obj).__name__} in a parser's tables")


def _decoded(obj: dict[str, Any]) -> Any:
    """One JSON object of `_encode`'s back as it was (json calls it innermost first, so a tuple key is a tuple)."""
    if _TUPLE in obj:
        return tuple(obj[_TUPLE])
    if _ITEMS in obj:
        return {(tuple(k) if isinstance(k, list) else k): v for k, v in obj[_ITEMS]}
    return obj
