"""The lark grammars in `grammars/` (one folder per format, `grammars/<format>/<name>.lark`, shared terminals in
`grammars/_common.lark`): their text, what their header comments say, and single lines parsed with them."""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

import lark
from lark import Lark, Tree

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


def build(text: str) -> Lark:
    """LALR where the grammar file says `// parser: lalr` (line formats without ambiguity: a tenth of the
    cost to load and to parse); Earley where templates overlap and only a dynamic lexer can tell them apart."""
    paths = [str(data_dir("grammars"))]
    if _is_lalr(text):
        return Lark(text, parser="lalr", start="start", import_paths=paths)
    return Lark(text, parser="earley", lexer="dynamic", start="start", import_paths=paths)


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
    return cached(name, key, Lark, lambda: build(text), parser_cache.dumps, lambda data: parser_cache.loads(data, lalr))


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
    if kinds == ["start"]:
        fast, start = literal_first(text), "start"
    else:
        fast, start = f"{text}\n{FAST}: {' | '.join(kinds)}\n", FAST
    key = hashlib.sha256(f"{lark.__version__}|{code_version()}|{fast}|{source(COMMON)}".encode()).hexdigest()[:20]
    paths = [str(data_dir("grammars"))]

    def build_fast() -> Lark:
        return Lark(fast, parser="lalr", start=start, import_paths=paths)

    return cached(f"{name}-fast", key, Lark, build_fast, parser_cache.dumps, lambda data: parser_cache.loads(data, True))


_TERMINAL_DEF = re.compile(r"^([A-Z_][A-Z0-9_]*)[ \t]*:", re.M)


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


@cache
def templates(name: str, rule: str = "start") -> frozenset[str]:
    """The rules that are alternatives of `start` (the templates, or line kinds, of a grammar), or of `rule`."""
    whole = directive(source(name), "lalr first") == ["start"]  # the LALR reader has the same rules, and loads faster
    grammar = fast_parser(name) if whole else parser(name)
    assert grammar is not None
    return frozenset(s.name for r in grammar.rules if r.origin.name == rule for s in r.expansion if not s.is_term)
