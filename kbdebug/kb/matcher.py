"""Map records to rules, fold consequences into their causes, order incidents root cause first."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from kbdebug.diagnosis import Consequence, Diagnosis, Incident
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Match, Rule
from kbdebug.records import Record

DEVICE_KINDS = ("kernel_assert", "sanitizer")


@cache
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def field_text(rec: Record, name: str) -> str | None:
    obj: Any = rec
    for part in name.split("."):
        if isinstance(obj, dict):
            obj = obj.get(part)
        else:
            obj = getattr(obj, part, None)
        if obj is None:
            return None
    if isinstance(obj, (list, tuple)):
        return " ".join(str(x) for x in obj)
    return str(obj)


def matches(m: Match, rec: Record) -> bool:
    if m.kind != rec.kind:
        return False
    for name, pattern in m.fields.items():
        text = field_text(rec, name)
        if text is None or not _rx(pattern).search(text):
            return False
    for name, pattern in m.absent.items():
        text = field_text(rec, name)
        if text is not None and _rx(pattern).search(text):
            return False
    return True


def best_rule(rec: Record, kb: KnowledgeBase) -> tuple[Rule, Match] | None:
    best: tuple[int, float, Rule, Match] | None = None
    for rule in kb.rules:
        for m in rule.match:
            if matches(m, rec):
                cand = (rule.priority, m.confidence, rule, m)
                if best is None or cand[:2] > best[:2]:
                    best = cand
    return (best[2], best[3]) if best else None


def diagnose_records(records: list[Record], kb: KnowledgeBase, source: str = "-") -> Diagnosis:
    incidents: dict[str, Incident] = {}
    found_all = [best_rule(rec, kb) for rec in records]
    _explain_exceptions(records, found_all)
    for rec, found in zip(records, found_all, strict=True):
        if found is None:
            continue
        rule, m = found
        inc = incidents.get(rule.id)
        if inc is None:
            inc = incidents[rule.id] = Incident(rule=rule.id, title=rule.title, confidence=m.confidence,
                                                first_line=rec.first_line)
        inc.confidence = max(inc.confidence, m.confidence)
        inc.first_line = min(inc.first_line, rec.first_line)
        inc.records.append(rec)
        for key, val in rec.facts().items():
            inc.facts.setdefault(key, val)
        inc.device_evidence = inc.device_evidence or rec.kind in DEVICE_KINDS
    roots = _fold_consequences(list(incidents.values()), kb)
    roots.sort(key=lambda i: (0 if i.device_evidence else 1, i.first_line))
    for inc in roots:
        root_rule = kb.get(inc.rule)
        assert root_rule is not None
        inc.confidence = round(min(0.99, inc.confidence + 0.02 * len(inc.consequences)), 2)
        inc.checks = list(root_rule.checks)
        inc.commands = list(root_rule.commands)
    return Diagnosis(source=source, incidents=roots)


def _explain_exceptions(records: list[Record], found: list[tuple[Rule, Match] | None]) -> None:
    """A traceback joins the incident of the specific record its message (or its neighbour) produced.

    `RuntimeError: CUDA error: CUBLAS_STATUS_...` is one line read by two grammars; the exception
    carries the type and the frames, the library record the meaning.
    """
    for i, rec in enumerate(records):
        if rec.kind != "exception":
            continue
        own = found[i][0].priority if found[i] else -1
        best: tuple[Rule, Match] | None = None
        for j, other in enumerate(records):
            cand = found[j]
            if j == i or cand is None or other.kind == "exception":
                continue
            if rec.first_line - 3 <= other.first_line <= rec.last_line and cand[0].priority > own:
                if best is None or cand[0].priority > best[0].priority:
                    best = cand
        if best is not None:
            found[i] = best


def _fold_consequences(incidents: list[Incident], kb: KnowledgeBase) -> list[Incident]:
    """An incident whose rule lists a present cause in `consequence_of` is folded into it."""
    by_id = {i.rule: i for i in incidents}
    folded: set[str] = set()
    for inc in sorted(incidents, key=lambda i: i.first_line):
        rule = kb.get(inc.rule)
        assert rule is not None
        causes = [by_id[c] for c in rule.consequence_of if c in by_id and c != inc.rule and c not in folded]
        if "*" in rule.consequence_of:
            causes += [i for i in incidents if i.rule != inc.rule and i.rule not in folded
                       and "*" not in (kb.get(i.rule).consequence_of if kb.get(i.rule) else [])]
        if not causes:
            continue
        cause = min(causes, key=lambda i: (0 if i.device_evidence else 1, i.first_line))
        folded.add(inc.rule)
        cause.consequences.append(Consequence(rule=inc.rule, title=inc.title, first_line=inc.first_line,
                                              summary=_summary(inc)))
        cause.records.extend(inc.records)
        for key, val in inc.facts.items():
            cause.facts.setdefault(key, val)
    return [i for i in incidents if i.rule not in folded]


def _summary(inc: Incident) -> str:
    f = inc.facts
    for key in ("error_message", "cuda_error", "cublas_status", "cudnn_status"):
        if f.get(key):
            head = f"{f['error_type']}: " if key == "error_message" and f.get("error_type") else ""
            return f"{head}{f[key]}"
    return inc.title
