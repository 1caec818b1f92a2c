"""The cause an error's text speaks for when no rule's template or field fits it: each rule's indicator phrases
(`[[indicators]]`) looked for in the message, independent evidence combined, a phrase cut off by the end of a pasted
text counted for the part that is there. Kept apart from the matching it completes (kbdebug.diagnoser.match)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

from kbdebug.core.phrases import hedged, may_hold, required_texts
from kbdebug.diagnoser.memo import kept, rx
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Match, Rule
from kbdebug.records import Record

MIN_EVIDENCE = 0.5
INFERRED_CONFIDENCE = (0.45, 0.3)  # base + scale * evidence


def evidence_text(rec: Record) -> str | None:
    """The text of an error a rule's indicators are looked for in: its message, folded onto one line."""
    text = getattr(rec, "folded_message", None) or getattr(rec, "what", None)
    return text if isinstance(text, str) and text.strip() else None


MIN_CUT_PHRASE = 12  # a phrase cut off by the end of the text still counts from this many characters on


def _cut_phrase(lit: str, text: str) -> str:
    """The start of the phrase `lit` that the text ends with (a message cut mid-phrase), or "" when too little is there.

    The longest such start begins at the first place in the text's last len(lit)-1 characters where the
    phrase's first `_head` characters are and the rest of the text is how the phrase goes on."""
    tail = text.rstrip()
    head = _head(lit)
    j = tail.find(head, max(0, len(tail) - len(lit) + 1)) if lit else -1
    while j != -1 and len(tail) - j >= len(head):
        if lit.startswith(tail[j:]):
            return tail[j:]
        j = tail.find(head, j + 1)
    return ""


def _head(lit: str) -> str:
    """The least of a phrase a cut-off text must end with to count (MIN_CUT_PHRASE, or a third of a long phrase)."""
    return lit[: max(MIN_CUT_PHRASE, len(lit) // 3)]


_CASELESS = "(?i)"


class _Phrase(NamedTuple):
    """An indicator as `indicator_score` reads it, its private attributes copied out once: reading them off
    the model on every record was most of the cost of inferring a cause (a retry loop infers thousands)."""

    pattern: str
    weight: float
    lead: str
    required: frozenset[str] | None
    folded: frozenset[str] | None  # the required texts lower-cased
    head: str  # what a text cut inside the phrase ends with at least (`_cut_phrase`)
    caseless: bool  # the pattern ignores case itself


_PHRASES: dict[Hashable, tuple[object, Any]] = {}


def _phrases(rule: Rule) -> tuple[_Phrase, ...]:
    def make() -> tuple[_Phrase, ...]:
        phrases = []
        for ind in rule.indicators:
            required, caseless = ind.required, ind.pattern.startswith(_CASELESS)
            # a pattern that ignores case holds its texts in any case: lower-cased, they are in the lower-cased text
            texts = required_texts(ind.pattern[len(_CASELESS) :]) if caseless and required is None else required
            folded = None if texts is None else frozenset(t.lower() for t in texts)
            phrases.append(_Phrase(ind.pattern, ind.weight, ind.lead, required, folded, _head(ind.lead), caseless))
        return tuple(phrases)

    return kept(_PHRASES, rule, make)


class _Heard(NamedTuple):
    """What of every rule's phrases one text may hold, found in one pass over the distinct texts (instead of
    once per phrase of each of fifty rules): the required texts its lower-cased form holds, and the phrase heads
    its end holds. A phrase with neither can neither be found in it nor be cut off at its end."""

    present: frozenset[str]
    heads: frozenset[str]

    def may_fold(self, ind: _Phrase) -> bool:
        """Whether the lower-cased text holds one of the phrase's texts (or the phrase has none to hold)."""
        return ind.folded is None or not ind.folded.isdisjoint(self.present)

    def may_speak(self, ind: _Phrase) -> bool:
        return self.may_fold(ind) or ind.head in self.heads


_TEXTS: dict[Hashable, tuple[object, Any]] = {}


def _heard(kb: KnowledgeBase, text: str, lowered: str) -> _Heard:
    def make() -> tuple[frozenset[str], frozenset[str], int]:
        phrases = [ind for rule in kb.rules for ind in _phrases(rule)]
        texts = frozenset(t for ind in phrases for t in ind.folded or ())
        return texts, frozenset(ind.head for ind in phrases), max((len(ind.lead) for ind in phrases), default=0)

    texts, heads, longest = kept(_TEXTS, kb, make)
    end = text.rstrip()[-longest:] if longest else ""
    return _Heard(frozenset(t for t in texts if t in lowered), frozenset(h for h in heads if h in end))


_SPEAKERS: dict[Hashable, tuple[object, Any]] = {}


def _may_speak(kb: KnowledgeBase, heard: _Heard) -> list[Rule]:
    """The rules, in order, with a phrase that may speak in the text `heard` was read from (a rule with none
    scores nothing: `indicator_score` skips every phrase `_Heard.may_speak` rules out), found by what the text holds."""

    def make() -> tuple[set[int], dict[str, set[int]], dict[str, set[int]]]:
        always: set[int] = set()  # the rules with a phrase that needs no text, and those by each text and head
        by_text: dict[str, set[int]] = {}
        by_head: dict[str, set[int]] = {}
        for i, rule in enumerate(kb.rules):
            for ind in _phrases(rule):
                if ind.folded is None:
                    always.add(i)
                for t in ind.folded or ():
                    by_text.setdefault(t, set()).add(i)
                by_head.setdefault(ind.head, set()).add(i)
        return always, by_text, by_head

    always, by_text, by_head = kept(_SPEAKERS, kb, make)
    found = always.union(*(by_text[t] for t in heard.present), *(by_head[h] for h in heard.heads))
    return [kb.rules[i] for i in sorted(found)]


def indicator_score(rule: Rule, text: str, heard: _Heard) -> tuple[float, list[str]]:
    """Independent evidence combines: 1 - prod(1 - weight) over the rule's phrases found in `text` (whatever
    their letters' case; `heard`: what of the phrases it may hold); a phrase the text ends in the middle of
    counts in proportion to how much of it is there."""
    miss, found = 1.0, []
    for ind in _phrases(rule):
        if not heard.may_speak(ind):
            continue
        may_fold = heard.may_fold(ind)
        m = _reported(ind.pattern, text) if (may_fold if ind.caseless else may_hold(ind.required, text)) else None
        if m is None and not ind.caseless and may_fold:
            m = _reported(_CASELESS + ind.pattern, text)  # case lost or garbled in retyping: the phrase still speaks
        if m:
            miss *= 1.0 - ind.weight
            found.append(m.group(0))
        elif (cut := _cut_phrase(ind.lead, text)) and not hedged(text, len(text.rstrip()) - len(cut), len(text)):
            miss *= 1.0 - ind.weight * len(cut) / len(ind.lead)
            found.append(cut + "…")
    return 1.0 - miss, found


def _reported(pattern: str, text: str) -> Any:
    """The first place the phrase is reported in the text (not said as advice or a forecast), or None."""
    for m in rx(pattern).finditer(text):
        if not hedged(text, m.start(), m.end()):
            return m
    return None


def infer_rule(rec: Record, kb: KnowledgeBase) -> tuple[Rule, Match] | None:
    """When no template fits, the rule whose indicator phrases the error's text holds most strongly. Never from an
    exception printed as no failure (`ignored`: Python's `Exception ignored in:`, a c10 warning): a phrase it holds
    (`ProcessGroupNCCL` in the reminder to destroy a process group) names no cause; what a template reads in it does."""
    if getattr(rec, "ignored", False):
        return None
    text = evidence_text(rec)
    if text is None:
        return None
    best: tuple[float, int, Rule, list[str]] | None = None
    heard = _heard(kb, text, text.lower())
    for rule in _may_speak(kb, heard):
        score, found = indicator_score(rule, text, heard)
        if score >= MIN_EVIDENCE and (best is None or (score, rule.priority) > best[:2]):
            best = (score, rule.priority, rule, found)
    if best is None:
        return None
    score, _, rule, found = best
    base, scale = INFERRED_CONFIDENCE
    # made here from known values: constructed, not validated (validating would build Match's schema first)
    made = Match.model_construct(kind=rec.kind, confidence=round(base + scale * score, 2), priority=None)
    made._inferred_from = tuple(found)
    return rule, made
