"""What a grammar says about where its lines are, derived from the grammar itself and kept in the cache.

Three readings of each grammar's rules and terminals: `anchors` (where in a line a template may
start: its fixed first texts), `line_start` (the first terminals of a format told apart by its first
token) and `required_texts` (texts every line of a kind holds: the scanner's needles). Deriving them
walks the parser's rules and compiles regexes; shipped beside the grammars (kbdebug/parse/packaged.py)
and kept in the cache when a grammar or this code was edited since, a cold start that meets no line of
a format never loads that format's parser.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from lark import Lark
from lark.grammar import NonTerminal, Symbol
from lark.lexer import PatternStr

from kbdebug import _regex_cache
from kbdebug._cache import cached, code_version
from kbdebug.core import phrases, searching
from kbdebug.core.phrases import canonical_text, split_alternatives
from kbdebug.parse import packaged
from kbdebug.parse.grammar import fast_parser, parser
from kbdebug.parse.sources import COMMON, directive, files, folder, names, source

T = TypeVar("T")


_ALL_ANCHORS = phrases.LiteralSets()


class Anchors:
    """Where a line may hold the start of one of a grammar's templates, derived from the grammar itself.

    Each alternative of `start` begins with fixed text (`The size of tensor a (`) or with a free-form
    token followed by fixed text (`OP_NAME does not have a deterministic ...`). The fixed texts are
    searched for together (one linear pass); a free-form start is found by backing up from its text
    to the token before it, or to the start of the line when that token may hold spaces.
    """

    def __init__(self, direct: list[str], after: dict[str, bool]) -> None:
        self.direct = phrases.literal_finder(direct)
        self.after = after  # fixed text -> the free-form token before it may hold spaces
        self.number = _ALL_ANCHORS.add([*direct, *after])

    def starts(self, text: str, limit: int = 4) -> list[int]:
        """Offsets where a template may start in `text`, first first (at most `limit`)."""
        if self.number is not None:  # every format asks of each line: one pass tells which may start there
            hits = _ALL_ANCHORS.hits(text)
            if hits is not None and self.number not in hits:
                return []
        found: set[int] = set()
        for k in searching.starts(self.direct, text):
            found.add(k)
            if len(found) >= limit:
                break
        for lit, spaces in self.after.items():
            k = text.find(lit)
            if k <= 0:
                continue
            if spaces:
                found.add(len(text) - len(text.lstrip()))
            else:
                tok = _LAST_TOKEN.search(text, 0, k)
                if tok:
                    found.add(tok.start())
                    # the token may be glued to an exception's name by its colon (`RuntimeError:gather():`, a
                    # full-width colon folded back without the space a paste dropped)
                    glued = _GLUED.search(text, tok.start(), k)
                    if glued:
                        found.add(glued.end())
        return sorted(found)[:limit]


class _AnchorReader:
    """Reads a grammar's rules for the texts its templates start with (the data of `Anchors`)."""

    MIN_LITERAL = 4

    def __init__(self, grammar: Lark) -> None:
        self.grammar = grammar
        self.direct: set[str] = set()
        self.after: dict[str, bool] = {}

    def read(self, only: tuple[str, ...] | None) -> tuple[list[str], dict[str, bool]]:
        for rule in self.grammar.rules:  # each form of `start` (a shared prefix such as `=========` included)
            if rule.origin.name in (only or ("start",)) and rule.expansion:
                self._form(list(rule.expansion), frozenset({rule.origin.name}))
        return sorted(self.direct), self.after

    def _form(self, seq: list[Symbol], seen: frozenset[str]) -> None:
        """Anchor one sequence: on its fixed first text, else inside a rule it begins with, else on the
        fixed text after its free-form first token."""
        lits = self._starts(seq[0])
        if lits is not None:
            self.direct.update(lits)
            return
        if not seq[0].is_term:
            if seq[0].name not in seen:
                for rule in self.grammar.rules:
                    if rule.origin.name == seq[0].name and rule.expansion:
                        self._form([*rule.expansion, *seq[1:]], seen | {seq[0].name})
            return
        for sym in seq[1:]:  # free-form first token: anchor on the next fixed text
            nxt = self._starts(sym)
            if nxt:
                term = self.grammar.get_terminal(seq[0].name)
                sample = re.match(term.pattern.to_regexp(), f"a b {nxt[0]}")
                spaces = bool(sample) and " " in sample.group(0)  # type: ignore[union-attr]
                for lit in nxt:
                    self.after[lit] = self.after.get(lit, False) or spaces
                return

    def _starts(self, sym: Symbol, seen: frozenset[str] = frozenset()) -> list[str] | None:
        """The fixed texts `sym` can begin with; None when one of its forms begins with free-form text."""
        if not sym.is_term:  # a rule: what each of its forms begins with
            if sym.name in seen:
                return None
            lits: list[str] = []
            for rule in self.grammar.rules:
                if rule.origin.name == sym.name:
                    first = self._starts(rule.expansion[0], seen | {sym.name}) if rule.expansion else None
                    if first is None:
                        return None
                    lits += first
            return lits or None
        pattern = self.grammar.get_terminal(sym.name).pattern
        # each top-level alternative read as plain text, optional groups skipped (`(?:0D or )?1D target ...`)
        lits = (
            [pattern.value]
            if isinstance(pattern, PatternStr)
            else [canonical_text(x) for alt in split_alternatives(pattern.value) for x in _expand_start(alt)]
        )
        lits = [x.strip() for x in lits]
        return lits if all(len(x) >= self.MIN_LITERAL for x in lits) else None


_CHOICE = _regex_cache.compile(r"(.*?)(?<!\\)\(\?:([^()]*\|[^()]*)\)(?![?*+{])(.*)", re.S)
MOST_STARTS = 16  # texts one alternative expands to, at most


def _expand_start(alt: str) -> list[str]:
    """A regex alternative holding a choice (`[Ll]oss`, `(?:Loss|loss) is`, `Class values must be (?:smaller than
    num_classes|non-negative)`) as one text per choice: read as plain text, a choice would be its first branch
    only, and a message in another branch would have no anchor and never be read."""
    m = re.match(r"\[([A-Za-z]{1,4})\](.*)", alt, re.S)
    if m:
        return [c + m.group(2) for c in m.group(1)]
    m = _CHOICE.match(alt)
    if m:
        head, body, tail = m.groups()
        return [x for a in split_alternatives(body) for x in _expand_start(head + a + tail)][:MOST_STARTS]
    return [alt]


_LAST_TOKEN = _regex_cache.compile(r"\S+\s*$")
_GLUED = _regex_cache.compile(r"(?<=\w):(?=\w)")


@cache
def line_start(name: str) -> re.Pattern[str]:
    """What a line of this format begins with, as one regex to match at the start of a stripped line."""
    return _regex_cache.compile(_derived(name, "line_start", lambda: _line_start(parser(name))))


def _line_start(grammar: Lark) -> str:
    """What a line of this format begins with: the first terminal of each of its line kinds, as one
    regex to match at the start of a stripped line. For formats told apart by their first token (a
    traceback's `File`, `Traceback`, an exception type), where a line that matches none is not parsed."""
    firsts: set[str] = set()

    def visit(sym: Symbol, seen: frozenset[str]) -> None:
        if sym.is_term:
            firsts.add(grammar.get_terminal(sym.name).pattern.to_regexp())
        elif sym.name not in seen:
            for rule in grammar.rules:
                if rule.origin.name == sym.name and rule.expansion:
                    visit(rule.expansion[0], seen | {sym.name})

    visit(NonTerminal("start"), frozenset())
    return "|".join(f"(?:{p})" for p in sorted(firsts))


@cache
def required_texts(name: str) -> dict[str, frozenset[str] | None]:
    """For each line kind (template) of a grammar, texts one of which every such line holds."""
    return _derived(name, "texts", lambda: _required_texts(parser(name)))


def _required_texts(grammar: Lark) -> dict[str, frozenset[str] | None]:
    """For each line kind (template) of a grammar, texts one of which every such line holds (None:
    a line of that kind may hold no fixed text). Read off the grammar's rules and terminals: what a
    scanner searches for before it knows where a record starts (kbdebug.needles)."""
    memo: dict[str, frozenset[str] | None] = {}

    def of_symbol(sym: Symbol, seen: frozenset[str]) -> frozenset[str] | None:
        if sym.is_term:
            pattern = grammar.get_terminal(sym.name).pattern
            if isinstance(pattern, PatternStr):
                return frozenset({pattern.value}) if not pattern.flags else None
            return phrases.required_texts(pattern.to_regexp())
        if sym.name in seen:
            return None
        if sym.name not in memo:
            memo[sym.name] = of_rule(sym.name, seen | {sym.name})
        return memo[sym.name]

    def of_rule(rule_name: str, seen: frozenset[str]) -> frozenset[str] | None:
        union: set[str] = set()
        for rule in grammar.rules:
            if rule.origin.name != rule_name:
                continue
            best = _pick([of_symbol(sym, seen) for sym in rule.expansion])
            if best is None:
                return None
            union |= best
        return frozenset(union) or None

    out: dict[str, frozenset[str] | None] = {}
    for rule in grammar.rules:  # each form of `start`: its template, and what its whole sequence must hold
        if rule.origin.name != "start":
            continue
        kinds = [sym.name for sym in rule.expansion if not sym.is_term]
        kind = kinds[0] if kinds else "start"
        best = _pick([of_symbol(sym, frozenset({"start"})) for sym in rule.expansion])
        if kind in out and (out[kind] is None or best is None):
            out[kind] = None
        else:
            out[kind] = (out.get(kind) or frozenset()) | best if best else None
    return out


GOOD_TEXT = 6  # a text this long is rare enough in a log to search for


def _pick(candidates: list[frozenset[str] | None]) -> frozenset[str] | None:
    """Of the texts the parts of a sequence must hold: what it begins with when that is long enough
    (a prefix its kinds share: `=========`), else the best of them."""
    first = candidates[0] if candidates else None
    if first and min(len(t) for t in first) >= GOOD_TEXT:
        return first
    return max((c for c in candidates if c), key=phrases.texts_score, default=None)


@cache
def templates(name: str, rule: str = "start") -> frozenset[str]:
    """The rules that are alternatives of `start` (the templates, or line kinds, of a grammar), or of `rule`.
    Every reader's transformer asks it of its grammar: shipped, so that a line its LALR reader reads (a frame,
    a CUDA error's hint) never needs the grammar's Earley parser built to tell what kind of line it was."""
    return _derived(name, f"templates-{rule}", lambda: _templates(_rules_of(name), rule))


def _rules_of(name: str) -> Lark:
    """A parser holding grammar `name`'s rules: its LALR reader where that reads the whole grammar (it loads faster)."""
    whole = directive(source(name), "lalr first") == ["start"]
    fast = fast_parser(name) if whole else None
    return fast if fast is not None else parser(name)


def _templates(grammar: Lark, rule: str) -> frozenset[str]:
    return frozenset(s.name for r in grammar.rules if r.origin.name == rule for s in r.expansion if not s.is_term)


@cache
def anchors(name: str, *only: str) -> Anchors:
    """Where a template of grammar `name` (or only one of the templates `only`) may start in a line."""
    direct, after = _derived(name, _anchors_key(only), lambda: _AnchorReader(parser(name)).read(only or None))
    return Anchors(direct, after)


def _anchors_key(only: tuple[str, ...]) -> str:
    """The name the anchors of `only` (or of all templates) are kept and shipped under."""
    return f"anchors-{'-'.join(only) or 'start'}"


@cache
def own_line(name: str) -> Anchors | None:
    """Where a line kind that a tool always prints at the start of a line (`// own line: KIND ...` in the
    grammar: `terminate called after ...`, `what():`) begins inside a line: a paste that lost its
    newlines glued it there, and the line is read as two."""
    kinds = directive(source(name), "own line")
    return anchors(name, *kinds) if kinds else None


@cache
def own_lines() -> tuple[tuple[str, Anchors], ...]:
    """Each grammar that has `own line` kinds, with their anchors: what `kbdebug.parse.walk.unglue` asks of every
    line, read once per process instead of once per grammar per line."""
    return tuple((name, a) for name in names() if (a := own_line(name)) is not None)


# -- the scanner's needles --------------------------------------------------------------------------
MIN_NEEDLE = 4  # a text shorter than this cannot be searched for: it is everywhere
NEEDLE = 6  # needles are this long (or a whole shorter text): `tion` would hit every other English line


def openers(name: str) -> list[str]:
    """The line kinds of grammar `name` that open a record: `// scan for: a b` (`*` for all, `none`)."""
    kinds = required_texts(name)
    words = directive(source(name), "scan for") or ["*"]
    if words == ["*"]:
        return sorted(kinds)
    return [] if words == ["none"] else [w for w in words if w in kinds]


@cache
def grammar_needles(name: str) -> tuple[bytes, ...]:
    """A few short byte strings such that every line of grammar `name` that opens a record holds one."""
    return _derived(name, "needles", lambda: _needles(name))


def _needles(name: str) -> tuple[bytes, ...]:
    texts: set[bytes] = set()
    for kind in openers(name):
        found = required_texts(name)[kind]
        if found is None or min(len(t) for t in found) < MIN_NEEDLE:
            raise ValueError(f"{files()[name]}: line kind {kind!r} opens a record but holds no searchable text")
        texts |= {t.encode() for t in found}
    return cover(texts)


def cover(texts: set[bytes]) -> tuple[bytes, ...]:
    """Greedy set cover: the substring found in most of the texts not yet covered, until all are."""
    left = set(texts)
    chosen: list[bytes] = []
    while left:
        counts: dict[bytes, int] = {}
        for text in left:
            subs = {text[i : i + NEEDLE] for i in range(max(1, len(text) - NEEDLE + 1))}
            for sub in subs:
                counts[sub] = counts.get(sub, 0) + 1
        best = max(counts, key=lambda s: (_rarity(s) > 0, counts[s], _rarity(s), s))
        chosen.append(best)
        left = {t for t in left if best not in t}
    for needle in reversed(list(chosen)):  # a needle whose texts the others all hold is idle
        rest = [n for n in chosen if n != needle]
        if all(any(n in t for n in rest) for t in texts if needle in t):
            chosen = rest
    return tuple(sorted(chosen))


def _rarity(needle: bytes) -> int:
    """Capitals, digits and punctuation are rarer in a log than lower-case words (`Iterat`, not `ration`)."""
    return sum(not (97 <= b <= 122 or b == 32) for b in needle)


def _derived(name: str, what: str, build: Callable[[], T]) -> T:
    """`build()`'s reading of grammar `name`: the one shipped with the grammars when it was derived from
    this grammar text and this code (kbdebug.parse.packaged), else kept in the cache under them."""
    shipped = packaged.shipped_reading(name, what)
    if shipped is not None:
        return shipped  # type: ignore[no-any-return]
    key = hashlib.sha256("|".join([source(name), source(COMMON), code_version()]).encode()).hexdigest()[:20]
    return cached(f"{name}-{what}", key, object, build)  # type: ignore[return-value]


def packaged_readings() -> dict[Path, dict[str, Any]]:
    """Every reading the parse layer asks of each grammar, derived from the grammar itself, by the file it is
    shipped in: each format folder's derived.json (`python -m kbdebug.parse` writes them, a test compares)."""
    files: dict[Path, dict[str, Any]] = {}
    for name in names():
        grammar = parser(name)
        readings: dict[str, Any] = {
            _anchors_key(()): _AnchorReader(grammar).read(None),
            "line_start": _line_start(grammar),
            "texts": _required_texts(grammar),
            "needles": _needles(name),
            "templates-start": _templates(grammar, "start"),
        }
        kinds = directive(source(name), "own line")
        if kinds:
            readings[_anchors_key(tuple(kinds))] = _AnchorReader(grammar).read(tuple(kinds))
        entry = {"grammar": packaged.grammar_hash(name), "readings": {w: packaged.encode(w, v) for w, v in readings.items()}}
        files.setdefault(folder(name) / packaged.FILE, {"code": packaged.READINGS, "grammars": {}})["grammars"][name] = entry
    return files


@cache
def _texts_of(name: str) -> frozenset[str] | None:
    """The texts one of which every line of grammar `name` holds; None when a kind of line needs none."""
    kinds = required_texts(name).values()
    return None if any(texts is None for texts in kinds) else frozenset(t for texts in kinds if texts for t in texts)


def may_hold(name: str, text: str) -> bool:
    """Whether `text` holds one of the texts that a line of grammar `name` must hold (`Tried to allocate`
    for an OOM): worth parsing, without loading the parser to find out. Several readers ask it of every line:
    the texts are searched for together, in one pass (`_finder_of`)."""
    finder = _finder_of(name)
    return finder is True or (finder is not False and searching.finds(finder, text))


MANY_TEXTS = 32  # from this many texts on, RE2's one pass beats Python's engine trying each at every place


@cache
def _finder_of(name: str) -> phrases.Finder | bool:
    """One search for all the texts of `_texts_of(name)`: True where no text is required (every line may be
    the grammar's), False where the set is empty (none may). RE2 where there are many (one linear pass over
    the line, whatever their number); Python's engine for a few, which it finds faster than RE2's call costs."""
    texts = _texts_of(name)
    if texts is None:
        return True
    if not texts:
        return False
    ordered = sorted(texts, key=lambda t: (-len(t), t))
    if len(ordered) > MANY_TEXTS:
        return phrases.literal_finder(ordered)
    return _regex_cache.compile("|".join(re.escape(t) for t in ordered))
