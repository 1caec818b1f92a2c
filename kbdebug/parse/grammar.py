"""Load the lark grammars in `grammars/` and parse single lines with them."""

from __future__ import annotations

import copyreg
import hashlib
import importlib
import io
import pickle
import re
import sys
import types
from functools import cache

import lark
from lark import Lark, Tree
from lark.exceptions import LarkError

from kbdebug._cache import cached, code_version
from kbdebug._resources import data_dir

GRAMMARS = (
    "kernel_assert",
    "traceback",
    "cuda_error",
    "sanitizer",
    "sanitizer_location",
    "oom",
    "distributed",
    "elastic",
    "messages",
    "job",
    "shell",
)


def _dumps(obj: Lark) -> bytes:
    # Lark's own cache=True is LALR-only; an Earley parser pickles once modules travel by name, and
    # its terminals travel as text, compiled when first tried (_terminal).
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[types.ModuleType] = lambda m: (importlib.import_module, (m.__name__,))
    pickler.dispatch_table[re.Pattern] = lambda rx: (_terminal, (rx.pattern, rx.flags))
    # The grammar as lark read it (its rule trees: a third of the pickle) is needed only to build the parser.
    built, obj.grammar = obj.grammar, None  # type: ignore[assignment]
    try:
        pickler.dump(obj)
    finally:
        obj.grammar = built
    return buf.getvalue()


def _terminal(pattern: str, flags: int) -> _LazyRegex:
    """An unpickled Earley parser's terminal: plain text (most of messages.lark's are) is found with
    `str.startswith`, never compiled; a regex is compiled the first time the parser tries it."""
    text = _UNESCAPE.sub(r"\1", pattern)
    if not flags & ~re.UNICODE and re.escape(text) == pattern:
        return _Literal(pattern, flags, text)
    return _LazyRegex(pattern, flags)


_UNESCAPE = re.compile(r"\\(.)", re.S)


class _LazyRegex:
    """A terminal's regex, compiled on first use. Unpickling compiled all of messages.lark's 150
    terminals, a third of loading it, and one message meets half of them at most. After the first
    call `match` is the compiled pattern's own."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | _Found | None:
        self.match = re.compile(self.pattern, self.flags).match  # type: ignore[method-assign]
        return self.match(string, pos, endpos)

    def __getattr__(self, name: str) -> object:  # whatever else lark asks of a pattern
        return getattr(re.compile(self.pattern, self.flags), name)

    def __reduce__(self) -> tuple[object, tuple[str, int]]:
        return (_terminal, (self.pattern, self.flags))


class _Literal(_LazyRegex):
    def __init__(self, pattern: str, flags: int, text: str) -> None:
        super().__init__(pattern, flags)
        self.text = text

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> _Found | None:
        return _Found(string, pos, pos + len(self.text)) if string.startswith(self.text, pos, endpos) else None


class _Found:
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


@cache
def source(name: str) -> str:
    """The text of `grammars/<name>.lark` (read once per process: the parser, its cache key and the
    readings of kbdebug.parse.derive all need it)."""
    return (data_dir("grammars") / f"{name}.lark").read_text(encoding="utf-8")


def directive(text: str, key: str) -> list[str] | None:
    """The words of a grammar's `// KEY: word word (why)` comment (the reason in parentheses dropped), or
    None without one: `parser`, `scan for`, `own line` say what the grammar is to the code that reads it."""
    m = re.search(rf"^//\s*{re.escape(key)}:\s*(.*)$", text, re.M)
    return m.group(1).split("(")[0].split() if m else None


def _build(text: str) -> Lark:
    """LALR where the grammar file says `// parser: lalr` (line formats without ambiguity: a tenth of the
    cost to load and to parse); Earley where templates overlap and only a dynamic lexer can tell them apart."""
    paths = [str(data_dir("grammars"))]
    if _is_lalr(text):
        return Lark(text, parser="lalr", start="start", import_paths=paths)
    return Lark(text, parser="earley", lexer="dynamic", start="start", import_paths=paths)


@cache
def parser(name: str) -> Lark:
    """The parser for `grammars/<name>.lark`, built once and cached on disk.

    Building an Earley parser costs 10-20 ms per grammar, most of a cold `kbdebug explain`;
    unpickling it costs 1-4 ms. The cache key covers the grammar text, lark, Python and kbdebug's code
    version (how a parser is pickled), so an edited grammar or an upgrade never meets a stale parser; any cache problem means a rebuild.
    """
    text, common = source(name), source("_common")
    key = hashlib.sha256(f"{lark.__version__}|{code_version()}|{text}|{common}".encode()).hexdigest()[:20]
    if _is_lalr(text):  # LALR tables travel as lark's own serialised data, not as a pickled parser
        return cached(name, key, Lark, lambda: _build(text), _save, lambda data: Lark.load(io.BytesIO(data)))
    return cached(name, key, Lark, lambda: _build(text), _dumps)


def _save(obj: Lark) -> bytes:
    buf = io.BytesIO()
    obj.save(buf)
    return buf.getvalue()


def _is_lalr(text: str) -> bool:
    return (directive(text, "parser") or [""])[0] == "lalr"


def parse(name: str, text: str) -> Tree | None:
    """Parse one line; None when the line is not of this format (never raises)."""
    try:
        return parser(name).parse(text.strip())
    except (LarkError, RecursionError):
        return None


def first_alt(tree: Tree) -> Tree:
    """The one alternative of `start` that matched."""
    for child in tree.children:
        if isinstance(child, Tree):
            return child
    return tree


@cache
def templates(name: str, rule: str = "start") -> frozenset[str]:
    """The rules that are alternatives of `start` (the templates, or line kinds, of a grammar), or of `rule`."""
    grammar = parser(name)
    return frozenset(s.name for r in grammar.rules if r.origin.name == rule for s in r.expansion if not s.is_term)
