"""The lark grammars in `grammars/` (one folder per format, `grammars/<format>/<name>.lark`, shared terminals in
`grammars/_common.lark`): their text, what their header comments say, and single lines parsed with them."""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any

import lark
from lark import Lark, Tree

from kbdebug import _regex_cache
from kbdebug._cache import cached, code_version
from kbdebug._resources import data_dir
from kbdebug.parse import parser_cache
from kbdebug.parse.sources import COMMON, directive, folder, names, source


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
    tables: dict[Path, dict[str, Any]] = {}
    for (name, start), text in sorted(ASKED.items()):
        where, parser_id = folder(name), f"{name}:{start}"
        key = parser_cache.table_key(text, source(COMMON))
        entry = parser_cache.shipped_entries(where).get(parser_id)
        if not (isinstance(entry, dict) and entry.get("key") == key):
            entry = {"key": key, "tables": parser_cache.tables(_build_lalr(text, start))}
        tables.setdefault(where / parser_cache.SHIPPED, {})[parser_id] = entry
    return tables


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
    """An LALR parser that reads a line before the grammar's Earley parser does, at a tenth of its cost; None
    when the grammar's `// lalr first:` lists nothing (tests/test_grammars.py checks both parsers agree on every
    case and rule example wherever the LALR parser reads the line). A line it cannot read goes to Earley.

    `// lalr first: KIND ...` names line kinds of fixed form (a traceback's frame) that LALR reads whole.
    `// lalr first: start` reads the whole grammar, templates ending in free text included, with the fixed
    text lexed before free-form words (`literal_first`): the messages' templates start with fixed text that a
    free-form token (`OP_NAME`) would otherwise take."""
    text = source(name)
    kinds = directive(text, "lalr first")
    if not kinds or _is_lalr(text):
        return None
    # keyed by the grammar and the code that derives the reader's text from it: deriving it (`literal_first`
    # rewrites the whole grammar) is left to a build
    key = hashlib.sha256(f"{lark.__version__}|{code_version()}|{FAST}|{kinds}|{text}|{source(COMMON)}".encode()).hexdigest()[:20]

    def build_fast() -> Lark:
        if kinds == ["start"]:
            return lalr(literal_first(text), "start", name)
        return lalr(f"{text}\n{FAST}: {' | '.join(kinds)}\n", FAST, name)

    return cached(f"{name}-fast", key, Lark, build_fast, parser_cache.dumps, lambda data: parser_cache.loads(data, True))


@cache
def earley_fallback(name: str) -> bool:
    """Whether a line that the LALR reader of `// lalr first:` rejects goes on to the Earley parser: not where the
    grammar says `// earley fallback: none` (its LALR reader reads every line that Earley does: a failed Earley
    try costs a millisecond, and it would fail; tests/test_grammars.py holds the claim on every case, rule
    example line and anchored tail)."""
    return directive(source(name), "earley fallback") != ["none"]


_TERMINAL_DEF = _regex_cache.compile(r"^([A-Z_][A-Z0-9_]*)[ \t]*:", re.M)


def literal_first(text: str) -> str:
    """Grammar `text` for a standard lexer that tries fixed text first: its named terminals a step below the
    anonymous literals (`The size of tensor a (` before `OP_NAME: /\\S+/`), and the shared REST (whatever follows
    a template) below them all, so a template is read as far as it goes before the rest of the line is REST."""
    lowered = _TERMINAL_DEF.sub(r"\1.-1:", text)
    if not re.search(r"^%import _common\b.*\bREST\b", text, re.M):
        return lowered
    rest = re.search(r"^REST:[ \t]*(.+)$", source(COMMON), re.M)
    assert rest is not None, "grammars/_common.lark defines REST"
    return f"{lowered}\n%override REST.-2: {rest.group(1)}\n"


def _is_lalr(text: str) -> bool:
    return (directive(text, "parser") or [""])[0] == "lalr"


def first_alt(tree: Tree) -> Tree:
    """The one alternative of `start` that matched."""
    for child in tree.children:
        if isinstance(child, Tree):
            return child
    return tree
