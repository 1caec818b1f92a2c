"""kbdebug._regex_cache: `re.compile` with its programs kept between runs, which lark's lexers use in the place of `re`."""

from __future__ import annotations

import array
import marshal
import os
import re
from pathlib import Path

import pytest
from lark.lexer import BasicLexer, ContextualLexer

from kbdebug import _regex_cache
from kbdebug.parse.grammar import fast_parser, parser
from kbdebug.parse.parser_cache import dumps, loads
from kbdebug.parse.sources import directive, names, source

LALR = [g for g in names() if fast_parser(g) is not None or "lalr" in (directive(source(g), "parser") or [])]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KBDEBUG_NO_CACHE", raising=False)
    monkeypatch.setattr(_regex_cache, "_COMPILED", {})
    monkeypatch.setattr(_regex_cache, "_FOLDERS", {})
    return tmp_path / "cache"


def _lexers(grammar: str) -> list[BasicLexer]:
    """The lexers of the grammar's LALR parser as read back from the cache, one for each set of terminals a state accepts."""
    read_back = loads(dumps(fast_parser(grammar) or parser(grammar)), True)
    lexer = read_back.parser.lexer
    assert isinstance(lexer, ContextualLexer)
    return list({id(lx): lx for lx in lexer.lexers.values()}.values())


@pytest.mark.parametrize("grammar", LALR)
def test_lexers_read_back_compile_with_the_kept_programs(grammar: str) -> None:
    """A parser read back from the cache compiles its lexers' patterns through kbdebug._regex_cache."""
    lexers = _lexers(grammar)
    assert lexers
    assert all(lx.re is _regex_cache for lx in lexers)


@pytest.mark.parametrize("grammar", ["messages", "traceback", "oom"])
def test_a_kept_program_makes_the_pattern_re_makes(cache: Path, grammar: str) -> None:
    """Each state's alternation of terminals, compiled, kept and read back in a fresh process (the memo emptied),
    is the pattern `re.compile` makes: a Pattern's equality compares its program."""
    patterns = []
    for lexer in _lexers(grammar)[:40]:
        for mre in lexer.scanner._mres:
            patterns.append((mre.pattern, mre.flags & ~re.UNICODE))
    assert patterns and list(cache.rglob("*")), "the programs were not kept"
    _regex_cache._COMPILED.clear()
    for pattern, flags in patterns:
        assert _regex_cache.compile(pattern, flags) == re.compile(pattern, flags), pattern


def test_the_same_pattern_is_compiled_once_per_process(cache: Path) -> None:
    first = _regex_cache.compile(r"(?P<A>ab+)|(?P<B>\d+)")
    assert _regex_cache.compile(r"(?P<A>ab+)|(?P<B>\d+)") is first
    assert _regex_cache.match(r"(?P<A>ab+)|(?P<B>\d+)", "42x").lastgroup == "B"  # type: ignore[union-attr]


def test_a_damaged_or_foreign_program_is_compiled_again(cache: Path) -> None:
    pattern = r"(?P<A>ab+)|(?P<B>\d+)"
    _regex_cache.compile(pattern)
    (kept,) = [p for p in cache.rglob("*") if p.is_file()]
    for damage in (b"\x00garbage", kept.read_bytes()[:-7]):
        kept.write_bytes(damage)
        _regex_cache._COMPILED.clear()
        assert _regex_cache.compile(pattern) == re.compile(pattern)
    # another pattern's program under this one's name: read from a private file (the cache trusts what it wrote) ...
    other = _regex_cache._program(r"(?P<A>xy+)|(?P<B>\d+)", 0)
    assert other is not None
    final, code, groups, groupindex, indexgroup = other
    planted = marshal.dumps((pattern, 0, final, array.array(_regex_cache._CODE, code).tobytes(), groups, groupindex, indexgroup))
    kept.write_bytes(planted)
    _regex_cache._COMPILED.clear()
    assert _regex_cache.compile(pattern).match("xyy")
    # ... but never from one that others could have written
    kept.write_bytes(planted)
    os.chmod(kept, 0o666)
    _regex_cache._COMPILED.clear()
    assert _regex_cache.compile(pattern) == re.compile(pattern)
    assert not _regex_cache.compile(pattern).match("xyy")


def test_with_no_cache_it_is_re_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KBDEBUG_NO_CACHE", "1")
    monkeypatch.setattr(_regex_cache, "_COMPILED", {})
    monkeypatch.setattr(_regex_cache, "_FOLDERS", {})
    assert _regex_cache.compile(r"x+(?P<n>\d)") == re.compile(r"x+(?P<n>\d)")
    assert not (tmp_path / "cache").exists()
