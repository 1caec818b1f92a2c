"""The fixed text inside a regex: what the message anchors of a grammar and a rule's indicator phrases
are found by. A leaf module: the grammars (kbdebug.parse) and the rules (kbdebug.kb) both use it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from kbdebug.core.lazy import lazy


def split_alternatives(regex: str) -> list[str]:
    """The top-level alternatives of a regex (`a(?:b|c)|d` -> `a(?:b|c)`, `d`)."""
    alts, depth, cur, i = [], 0, "", 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\" and i + 1 < len(regex):
            cur += regex[i : i + 2]
            i += 2
            continue
        depth += 1 if ch in "([" else (-1 if ch in ")]" else 0)
        if ch == "|" and depth == 0:
            alts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    return [*alts, cur]


def canonical_text(regex: str) -> str:
    """The plain text a phrase regex reads as when each group takes its first alternative
    (`Class values must be (?:smaller than num_classes|non-negative)` -> `Class values must be smaller
    than num_classes`), up to the first part that is not fixed text. Used to recognise a phrase that
    a cut-off message ends in the middle of."""
    out, i = "", 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            if i + 1 < len(regex) and not regex[i + 1].isalnum():
                out += regex[i + 1]
                i += 2
                continue
            break
        if ch == "|":
            break
        if ch == "(":
            depth, j = 0, i
            while j < len(regex):
                if regex[j] == "\\":
                    j += 2
                    continue
                depth += {"(": 1, ")": -1}.get(regex[j], 0)
                if depth == 0:
                    break
                j += 1
            inner = regex[i + 1 : j]
            inner = inner[2:] if inner.startswith("?:") else inner
            if inner.startswith("?"):
                break
            part = canonical_text(inner)
            out += part
            if j + 1 < len(regex) and regex[j + 1] in "?*":  # an optional group: the text reads on without it
                out = out[: len(out) - len(part)]
            i = j + 1
            if i < len(regex) and regex[i] in "?*+":
                i += 1
            continue
        if ch in "[.^$":
            break
        if ch in "?*" and out:
            out = out[:-1]
            i += 1
            continue
        if ch in "+{":
            break
        out += ch
        i += 1
    return out


def required_texts(regex: str) -> frozenset[str] | None:
    """Texts of which every match of `regex` holds at least one (`(?:Error|Exception)\\b` -> Error,
    Exception); None when a match may hold no fixed text at all (`\\w+`). What a scanner may search
    for before it knows where a record starts: derived from the grammars' and rules' own patterns."""
    try:  # the stdlib reads the pattern: no second regex parser here
        import re._parser as sre  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10 names it sre_parse
        import sre_parse as sre  # type: ignore[no-redef,unused-ignore]

    try:
        parsed = sre.parse(regex)
        return None if parsed.state.flags & re.IGNORECASE else _seq_texts(parsed.data)
    except (re.error, RecursionError, TypeError, ValueError):
        return None


def _seq_texts(items: list[tuple[Any, Any]]) -> frozenset[str] | None:
    """A sequence's best set: its longest run of fixed text (a choice between fixed texts multiplies the
    run: `E(?:rror|xception)` -> Error, Exception), or the best set of one of its parts."""
    try:
        import re._constants as c  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10
        import sre_constants as c  # type: ignore[no-redef,unused-ignore]

    best: frozenset[str] | None = None
    run: set[str] = {""}

    def consider(cand: frozenset[str] | None) -> None:
        nonlocal best
        if cand and all(cand) and (best is None or texts_score(cand) > texts_score(best)):
            best = cand

    for op, av in items:
        if op is c.LITERAL:
            run = {r + chr(av) for r in run}
            continue
        literal_alts = _literal_alternatives(op, av, c)
        if literal_alts is not None and len(run) * len(literal_alts) <= MAX_TEXTS:
            run = {r + a for r in run for a in literal_alts}
            continue
        consider(frozenset(run))
        run = {""}
        if op is c.SUBPATTERN and not av[1] & re.IGNORECASE:  # a case-blind group has no one text
            consider(_seq_texts(av[-1].data))
        elif op is c.BRANCH:
            alts = [_seq_texts(alt.data) for alt in av[1]]
            consider(None if any(a is None for a in alts) else frozenset().union(*alts))  # type: ignore[arg-type]
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)) and av[0] >= 1:  # possessive: 3.11
            consider(_seq_texts(av[2].data))
    consider(frozenset(run))
    return best


MAX_TEXTS = 16


def _literal_alternatives(op: Any, av: Any, c: Any) -> list[str] | None:
    """The texts of a choice between plain literals (`rror|xception`, `[cC]`), else None."""
    if op is c.IN and all(o is c.LITERAL for o, _ in av):
        return [chr(v) for _, v in av]
    if op is c.BRANCH and all(all(o is c.LITERAL for o, _ in alt.data) for alt in av[1]):
        return ["".join(chr(v) for _, v in alt.data) for alt in av[1]]
    if op is c.SUBPATTERN and not av[1] & re.IGNORECASE and len(av[-1].data) == 1:
        inner_op, inner_av = av[-1].data[0]
        return _literal_alternatives(inner_op, inner_av, c)
    return None


def may_hold(texts: frozenset[str] | None, text: str) -> bool:
    """False only where `text` holds none of the `texts` (from `required_texts`) a match must hold: then the
    regex need not be compiled or run. None (no fixed text known) always may."""
    return texts is None or any(t in text for t in texts)


def texts_score(texts: frozenset[str]) -> tuple[int, int]:
    """A set is as good as its shortest text (a needle that short is found everywhere), then smaller."""
    return (min(len(t) for t in texts), -len(texts))


class Finder(Protocol):  # over str or bytes, as its texts are
    def finditer(self, text: Any) -> Iterator[Any]: ...

    def search(self, text: Any, pos: int = ..., endpos: int = ...) -> Any: ...


def literal_finder(texts: Sequence[str] | Sequence[bytes]) -> Finder:
    """One pattern finding any of `texts` (str, or bytes for a scanner), longest first where two start at
    the same place, in one linear pass. Compiled by RE2 where it is installed: Python's engine parses a
    pattern in Python, and a grammar's few hundred fixed texts took it a few milliseconds of every cold
    start; RE2 compiles them in microseconds."""
    items: Sequence[Any] = texts
    escaped = [re.escape(x) for x in sorted(items, key=len, reverse=True)]
    pattern: Any = (b"|" if escaped and isinstance(escaped[0], bytes) else "|").join(escaped)
    try:
        import re2  # type: ignore[import-untyped]

        options = re2.Options()
        options.log_errors = False
        return re2.compile(pattern, options)  # type: ignore[no-any-return]
    except Exception:  # no binding here: Python's engine finds the same texts
        return re.compile(pattern)


class LiteralSets:
    """Many sets of fixed texts asked of the same line one after another (each format's anchors, a dozen per
    line): which sets have a text in the line, found for all of them in one pass (RE2's Set) and kept for that
    line, so each asker's own search runs only where its set has a hit. A sound filter: a set it says has no
    hit has none; where RE2 is not installed it says every set may."""

    def __init__(self) -> None:
        self._patterns: list[str] = []
        self._set: Any = None
        self._last: tuple[str, frozenset[int]] | None = None

    def add(self, texts: Sequence[str]) -> int | None:
        """Register a set of texts; its number, for `hits`. None for a set holding an empty text (or none at
        all): a search for it finds a start everywhere, so no line can be ruled out for it."""
        if not texts or not all(texts):
            return None
        self._patterns.append("|".join(re.escape(t) for t in texts))
        self._set, self._last = None, None
        return len(self._patterns) - 1

    def hits(self, text: str) -> frozenset[int] | None:
        """The numbers of the sets with a text in `text`; None when all may (no RE2 here)."""
        last = self._last
        if last is not None and (last[0] is text or last[0] == text):
            return last[1]
        if self._set is None:
            self._set = self._compile()
            if self._set is None:
                return None
        found = frozenset(self._set.Match(text) or ())  # None where no set has a hit
        self._last = (text, found)
        return found

    def _compile(self) -> Any:
        try:
            import re2  # type: ignore[import-untyped]
        except ImportError:  # Python's engine has no set matcher: every asker searches for itself
            return None
        options = re2.Options()
        options.log_errors = False
        matcher = re2.Set.SearchSet(options)
        for pattern in self._patterns:
            matcher.Add(pattern)
        matcher.Compile()
        return matcher


# A phrase said as advice or as a forecast reports nothing: `Tip: if you see Segmentation fault, set num_workers=0`,
# `UserWarning: To avoid CUDA out of memory, enable checkpointing`, `... may cause a segmentation fault`. The cue is
# looked for in the phrase's own clause before it (back to a comma or a sentence's end: in `To avoid data
# inconsistency, we are taking the entire process down` only the purpose is hedged) and in the words right after it
# (`Segmentation fault may occur when ...`). A causal report is no forecast: `This might be caused by insufficient
# shared memory` still speaks.
_HEDGE_BEFORE = lazy(
    r"(?i)\b(?:(?:if|when(?:ever)?|in\s+case)\s+you|in\s+case\s+of|avoid(?:s|ing)?|prevent(?:s|ing)?"
    r"|(?:may|might|can|could|will|would)\s+(?:cause|lead\s+to|result\s+in|trigger))\b"
)
_HEDGE_AFTER = lazy(r"(?i)[\s,]{0,3}(?:may|might|can|could)\s+(?:occur|happen|appear|arise)\b")
_CLAUSE_END = lazy(r"[.!?;,](?=\s|$)")


def hedged(text: str, start: int, end: int | None = None) -> bool:
    """Whether the phrase at text[start:end] is said as advice or a forecast rather than reported (_HEDGE_BEFORE);
    with `end` None, the words after it are not asked."""
    ends = [m.end() for m in _CLAUSE_END.finditer(text, max(0, start - 200), start)]
    clause = text[ends[-1] if ends else max(0, start - 200) : start]
    return bool(_HEDGE_BEFORE.search(clause) or (end is not None and _HEDGE_AFTER.match(text, end)))
