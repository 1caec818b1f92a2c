"""The lark grammars in `grammars/` (one folder per format, `grammars/<format>/<name>.lark`, shared terminals in
`grammars/_common.lark`): their text, what their header comments say, and single lines parsed with them."""

from __future__ import annotations

import hashlib
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import lark
from lark import Lark, Tree
from lark.exceptions import LarkError

from kbdebug._cache import cached, code_version
from kbdebug._resources import data_dir
from kbdebug.parse import parser_cache

COMMON = "_common"  # the shared terminals, at the top of grammars/


@cache
def files() -> dict[str, Path]:
    """Every grammar by name (its file's stem), folder by folder: the grammars are the folders' own files,
    so a new format's grammar is found where it is put."""
    root = data_dir("grammars")
    found = {p.stem: p for p in sorted(root.glob("*/*.lark"))}
    return {COMMON: root / f"{COMMON}.lark", **found}


def names() -> tuple[str, ...]:
    """The grammars of the formats (the shared `_common` is none)."""
    return tuple(name for name in files() if name != COMMON)


def folder(name: str) -> Path:
    """The format folder that holds grammar `name`."""
    return files()[name].parent


@cache
def source(name: str) -> str:
    """The text of grammar `name` (read once per process: the parser, its cache key and the readings of
    kbdebug.parse.derive all need it)."""
    return files()[name].read_text(encoding="utf-8")


def directive(text: str, key: str) -> list[str] | None:
    """The words of a grammar's `// KEY: word word (why)` comment (the reason in parentheses dropped), or
    None without one: `parser`, `scan for`, `own line` say what the grammar is to the code that reads it."""
    m = re.search(rf"^//\s*{re.escape(key)}:\s*(.*)$", text, re.M)
    return m.group(1).split("(")[0].split() if m else None


def build(text: str, name: str | None = None) -> Lark:
    """LALR where the grammar file says `// parser: lalr` (line formats without ambiguity: a tenth of the
    cost to load and to parse); Earley where templates overlap and only a dynamic lexer can tell them apart.
    `name`: the grammar `text` is, whose folder may ship its LALR tables (`lalr`)."""
    if _is_lalr(text):
        return lalr(text, "start", name) if name is not None else _build_lalr(text, "start")
    return Lark(text, parser="earley", lexer="dynamic", start="start", import_paths=[str(data_dir("grammars"))])


# Every LALR parser asked for in this process: (grammar, start) -> the text it is built from. What
# `python -m kbdebug.parse` ships, and what tests/test_packaged.py checks is shipped.
ASKED: dict[tuple[str, str], str] = {}


def lalr(text: str, start: str, name: str) -> Lark:
    """An LALR parser of `text` (grammar `name`'s own, or a reader of some of its line kinds built on it) from
    rule `start`: read from the tables shipped in the grammar's folder where they were built from this very
    text (kbdebug.parse.parser_cache.shipped: 3-4 ms), else built (15-30 ms)."""
    ASKED[(name, start)] = text
    key = parser_cache.table_key(text, source(COMMON))
    return parser_cache.shipped(folder(name), f"{name}:{start}", key) or _build_lalr(text, start)


def _build_lalr(text: str, start: str) -> Lark:
    return Lark(text, parser="lalr", start=start, import_paths=[str(data_dir("grammars"))])


def shipped_tables() -> dict[Path, dict[str, Any]]:
    """What each format folder's parsers.json holds when it is current: the tables of every LALR parser the code
    asks for now (each grammar's own, each Earley grammar's reader of its fixed line kinds), kept as they are
    where they were built from the same text (lark numbers its states anew in each build). With no cache."""
    for name in names():
        if _is_lalr(source(name)):
            parser(name)
        else:
            fast_parser(name)
    files: dict[Path, dict[str, Any]] = {}
    for (name, start), text in sorted(ASKED.items()):
        where, parser_id = folder(name), f"{name}:{start}"
        key = parser_cache.table_key(text, source(COMMON))
        entry = parser_cache.shipped_file(where).get(parser_id)
        if not (isinstance(entry, dict) and entry.get("key") == key):
            entry = {"key": key, "tables": parser_cache.tables(_build_lalr(text, start))}
        files.setdefault(where / parser_cache.SHIPPED, {})[parser_id] = entry
    return files


@cache
def parser(name: str) -> Lark:
    """The parser for grammar `name`, built once and kept on disk (kbdebug.parse.parser_cache).

    Building an Earley parser costs 10-20 ms per grammar, most of a cold `kbdebug explain`; reading it
    back costs 1-4 ms. The key covers the grammar text, lark, Python and kbdebug's code version (how a
    parser is kept), so an edited grammar or an upgrade never meets a stale parser; any cache problem
    means a rebuild."""
    text, common = source(name), source(COMMON)
    key = hashlib.sha256(f"{lark.__version__}|{code_version()}|{text}|{common}".encode()).hexdigest()[:20]
    lalr = _is_lalr(text)
    return cached(name, key, Lark, lambda: build(text, name), parser_cache.dumps, lambda data: parser_cache.loads(data, lalr))


FAST = "kbdebug_fast"  # the start rule of a grammar's LALR reader of its fixed line kinds


@cache
def fast_parser(name: str) -> Lark | None:
    """An LALR parser of the line kinds an Earley grammar lists as `// lalr first: KIND ...`: kinds of fixed
    form (a traceback's frame, a message template whole) that an LALR parser reads as the Earley parser does, at
    a tenth of its cost. A line none of them reads goes to the Earley parser; None when the grammar lists none
    (tests/test_grammars.py checks both parsers agree on every case and rule example)."""
    text = source(name)
    kinds = directive(text, "lalr first")
    if not kinds or _is_lalr(text):
        return None
    fast = f"{text}\n{FAST}: {' | '.join(kinds)}\n"
    key = hashlib.sha256(f"{lark.__version__}|{code_version()}|{fast}|{source(COMMON)}".encode()).hexdigest()[:20]

    def build_fast() -> Lark:
        return lalr(fast, FAST, name)

    return cached(f"{name}-fast", key, Lark, build_fast, parser_cache.dumps, lambda data: parser_cache.loads(data, True))


def _is_lalr(text: str) -> bool:
    return (directive(text, "parser") or [""])[0] == "lalr"


MEMO_LINES = 4096  # distinct lines whose readings are kept: a log repeats its warnings and retried errors
MEMO_CHARS = 4096  # a longer line is parsed each time it is met: keeping it would cost more memory than it saves


def parse(name: str, text: str) -> Tree | None:
    """Parse one line; None when the line is not of this format (never raises).

    A log prints the same lines over and over (a warning every step, a retried error's traceback), and a
    parse costs a millisecond: each distinct line is parsed once per grammar, and its tree (which no reader
    changes: they transform it into new values) is handed out again."""
    text = text.strip()
    if len(text) > MEMO_CHARS:
        return _parse(name, text)
    return _memo_parse(name, text)


def _parse(name: str, text: str) -> Tree | None:
    fast = fast_parser(name)
    if fast is not None:
        try:
            return Tree("start", fast.parse(text).children)  # as the Earley parser's `start` holds it
        except (LarkError, RecursionError):
            pass
    try:
        return parser(name).parse(text)
    except (LarkError, RecursionError):
        return None


_memo_parse = lru_cache(maxsize=MEMO_LINES)(_parse)


def forget() -> None:
    """Drop the lines read so far (a benchmark timing a pass over logs it has read before)."""
    _memo_parse.cache_clear()


def first_alt(tree: Tree) -> Tree:
    """The one alternative of `start` that matched."""
    for child in tree.children:
        if isinstance(child, Tree):
            return child
    return tree
