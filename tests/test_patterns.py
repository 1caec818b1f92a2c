"""No bundled pattern takes more than linear time: each is fed long repetitive texts built from its own
literals, at two lengths, and must not slow down faster than the text grows (a backtracking blow-up is
quadratic or worse). Rule patterns run on RE2; the scanner's, the parsers' and the grammars' terminals run
on Python's engine, on lines the scanner caps, and are checked here the same way.

The proof is a ratio, never a wall time: the CPU time of this thread (other processes' load does not count),
the least of several runs, at 16x the length; linear time grows 16x, quadratic 256x, and the bound (64x)
leaves a 4x slack either way."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import time
from collections.abc import Iterator
from types import ModuleType

import pytest

from kbdebug import normalise, scan
from kbdebug.core import frames, phrases, shapes
from kbdebug.core.lazy import LazyPattern, compiled
from kbdebug.kb import load_kb
from kbdebug.kb.patterns import compile_pattern, super_linear_reason
from kbdebug.parse import walk
from kbdebug.parse.grammar import parser
from kbdebug.parse.registry import formats
from kbdebug.parse.sources import names

SMALL, BIG = 1_000, 16_000  # 16x longer: linear time grows 16x, quadratic 256x
BOUND = 64


def module_patterns(*modules: ModuleType) -> Iterator[tuple[str, re.Pattern[str]]]:
    """Every pattern a module defines, compiled now where it is compiled when first used (kbdebug.core.lazy)."""
    kinds = (re.Pattern, LazyPattern)
    for mod in modules:
        for name, val in vars(mod).items():
            if isinstance(val, kinds):
                yield f"{mod.__name__}.{name}", compiled(val)
            elif isinstance(val, list):  # the scanner's (pattern, group) prefix table, normalise's prefixes
                for i, item in enumerate(val):
                    if isinstance(item, tuple) and item and isinstance(item[0], kinds):
                        yield f"{mod.__name__}.{name}[{i}]", compiled(item[0])
                    elif isinstance(item, kinds):
                        yield f"{mod.__name__}.{name}[{i}]", compiled(item)


class Anchored:
    """A pattern its code only ever tries at one position (`re.match`, a lexer at a token start)."""

    def __init__(self, rx: re.Pattern[str]) -> None:
        self.rx = rx

    def search(self, text: str) -> object:
        return self.rx.match(text)


def bundled() -> list[tuple[str, str, object]]:
    out: list[tuple[str, str, object]] = []
    for rule in load_kb().rules:
        for m in rule.match:
            for field, pat in {**m.fields, **m.absent}.items():
                out.append((f"{rule.id}.{field}", pat, compile_pattern(pat)))
        for i, ind in enumerate(rule.indicators):
            out.append((f"{rule.id}.indicators[{i}]", ind.pattern, compile_pattern(ind.pattern)))
    readers = [sys.modules[f.reader.__module__] for f in formats()]
    # normalise is a package: its patterns live in each of its modules
    pieces = [importlib.import_module(m.name) for m in pkgutil.iter_modules(normalise.__path__, f"{normalise.__name__}.")]
    for name, rx in module_patterns(scan, normalise, *pieces, frames, shapes, phrases, walk, *readers):
        if isinstance(rx.pattern, bytes):  # the scanner's byte patterns: the same regex, timed on text
            rx = re.compile(rx.pattern.decode("latin-1"), rx.flags & ~re.ASCII)
        out.append((name, rx.pattern, Anchored(rx) if rx.pattern.startswith("^") else rx))
    for grammar in names():
        for term in parser(grammar).terminals:
            rx = re.compile(term.pattern.to_regexp())
            out.append((f"{grammar}.lark:{term.name}", rx.pattern, Anchored(rx)))
    return out


def adversarial(pattern: str, n: int) -> Iterator[str]:
    """Texts that make a backtracking engine work: its literals repeated, cut short, and its characters."""
    lit = phrases.canonical_text(pattern.removeprefix("(?i)")) or "a"
    pieces = {lit, lit[:-1] or lit, lit + " ", *(ch for ch in set(pattern) if ch.isalnum() or ch in " :,.[]()-_")}
    for piece in sorted(pieces)[:12]:
        yield (piece * (n // len(piece) + 1))[:n]
    yield ("a" * 20 + " ") * (n // 21)


def cpu_cost(rx: object, pattern: str, n: int) -> float:
    """The CPU time of searching all the adversarial texts of length n (the thread's, so load elsewhere does
    not count), the least of five runs (a preemption only ever adds)."""
    texts = list(adversarial(pattern, n))
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        for text in texts:
            rx.search(text)  # type: ignore[attr-defined]
        best = min(best, time.thread_time() - start)
    return best


PATTERNS = bundled()


@pytest.mark.parametrize(("name", "pattern", "rx"), PATTERNS, ids=[p[0] for p in PATTERNS])
def test_pattern_time_grows_linearly(name: str, pattern: str, rx: object) -> None:
    small = max(cpu_cost(rx, pattern, SMALL), 1e-6)  # the clock's grain: a ratio to nothing means nothing
    big = cpu_cost(rx, pattern, BIG)
    assert big <= BOUND * small, f"{name}: {big / small:.0f}x the time for {BIG // SMALL}x the text (linear: {BIG // SMALL}x)"


def test_the_ratio_catches_a_quadratic_pattern() -> None:
    """The proof can fail: ` *x` searched in spaces retries from every start, quadratic in the length."""
    quadratic = re.compile(" *x")
    assert cpu_cost(quadratic, " *x", BIG) > BOUND * cpu_cost(quadratic, " *x", SMALL)


def test_rule_patterns_have_no_nested_repetition() -> None:
    """What `rules lint` refuses in a user's rule never reaches the bundled ones either."""
    for rule in load_kb().rules:
        for m in rule.match:
            for pat in {**m.fields, **m.absent}.values():
                assert super_linear_reason(pat) is None, (rule.id, pat)
        for ind in rule.indicators:
            assert super_linear_reason(ind.pattern) is None, (rule.id, ind.pattern)


def test_an_indicator_is_searched_only_where_its_fixed_text_is() -> None:
    """The texts every match of an indicator holds are read off its pattern at load; a message holding
    none of them is not searched, and one that holds them is (never a false skip)."""
    from kbdebug.kb.model import Indicator

    ind = Indicator(pattern=r"Class values must be (?:smaller than num_classes|non-negative)")
    assert ind.may_match("ValueError: Class values must be non-negative.")
    assert not ind.may_match("RuntimeError: CUDA error: device-side assert triggered")
    blind = Indicator(pattern="(?i)one[_-]?hot")  # case-blind: no one text, so always searched
    assert blind.may_match("ONE-HOT") and blind.may_match("anything")
    for rule in load_kb().rules:  # every bundled indicator: whatever it matches, its prefilter lets through
        for i in rule.indicators:
            for text in rule.examples.positive:
                if compile_pattern(i.pattern).search(text):
                    assert i.may_match(text), (rule.id, i.pattern)
