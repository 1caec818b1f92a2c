"""Map records to rules, fold consequences into their causes, order incidents root cause first."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Sequence, Set
from typing import Any, NamedTuple, cast

from kbdebug.core.facts import Facts, merge
from kbdebug.core.phrases import may_hold, texts_score
from kbdebug.core.searching import finds
from kbdebug.core.stamps import Stamp, earliest
from kbdebug.diagnoser.inference import infer_rule
from kbdebug.diagnoser.memo import kept, rx
from kbdebug.diagnosis import Consequence, FirstFailure, Incident
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Match, Rule
from kbdebug.kb.patterns import Pattern
from kbdebug.records import Record

DEVICE_KINDS = ("kernel_assert", "sanitizer")


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


class _Plan(NamedTuple):
    """A template's field tests as `matches` runs them, read off the model once: (field, texts one of which a
    match must hold or None, compiled pattern) for the fields it needs and for those it must not find."""

    fields: tuple[tuple[str, frozenset[str] | None, Pattern], ...]
    absent: tuple[tuple[str, frozenset[str] | None, Pattern], ...]


_PLANS: dict[Hashable, tuple[object, Any]] = {}


def _plan(m: Match) -> _Plan:
    def make() -> _Plan:
        needs = m.needs
        return _Plan(
            tuple((name, needs.get(p), rx(p)) for name, p in m.fields.items()),
            tuple((name, needs.get(p), rx(p)) for name, p in m.absent.items()),
        )

    return kept(_PLANS, m, make)


def _found(test: tuple[str, frozenset[str] | None, Pattern], rec: Record, texts: dict[str, str | None]) -> bool | None:
    """Whether the field's pattern finds a match in the record's field (None: the record has no such field)."""
    name, needs, rx = test
    if name not in texts:
        texts[name] = field_text(rec, name)
    text = texts[name]
    if text is None:
        return None
    return may_hold(needs, text) and finds(rx, text)


def matches(m: Match, rec: Record, texts: dict[str, str | None] | None = None) -> bool:
    """Whether template `m` reads record `rec`: its kind, a match of each field pattern, none of the absent ones.
    `texts` keeps the record's field texts across the templates tried on it."""
    if m.kind != rec.kind:
        return False
    texts = {} if texts is None else texts
    plan = _plan(m)
    return all(_found(test, rec, texts) for test in plan.fields) and not any(_found(test, rec, texts) for test in plan.absent)


def captured(m: Match, rec: Record) -> dict[str, str]:
    """The named groups of a match's field patterns (`(?P<op>\\w+)`): facts the rule reads off the record itself."""
    out: dict[str, str] = {}
    for name, pattern in m.fields.items():
        compiled = rx(pattern)
        if not compiled.groupindex:  # no named group: nothing to capture
            continue
        text = field_text(rec, name)
        found = compiled.search(text) if text is not None else None
        if found is not None:
            out.update({k: v for k, v in found.groupdict().items() if v is not None})
    return out


class _KindIndex(NamedTuple):
    """The templates of one record kind, found by text: each template is listed under the texts one of which its
    most telling field must hold (`Match.needs`), so a record is tried only against the templates whose text its
    fields hold, in rule order, and those that need no text. A record of a common kind (an exception) would
    otherwise be tried against a hundred templates."""

    entries: tuple[tuple[Rule, Match], ...]
    always: frozenset[int]
    keyed: tuple[tuple[str, tuple[tuple[str, tuple[int, ...]], ...]], ...]  # field -> (text, templates)


_KINDS: dict[Hashable, tuple[object, Any]] = {}


def _kind_index(kb: KnowledgeBase, kind: str) -> _KindIndex:
    def make() -> _KindIndex:
        entries = tuple((rule, m) for rule in kb.rules for m in rule.match if m.kind == kind)
        always: set[int] = set()
        keyed: dict[str, dict[str, list[int]]] = {}
        for i, (_, m) in enumerate(entries):
            # read off the model, not the plan: a template's patterns are compiled when a record is tried on it
            texts = m.needs
            tests = [(name, needs) for name, p in m.fields.items() if (needs := texts.get(p))]
            if not tests:
                always.add(i)
                continue
            name, needs = max(tests, key=lambda test: texts_score(test[1]))
            for text in needs:
                keyed.setdefault(name, {}).setdefault(text, []).append(i)
        return _KindIndex(
            entries, frozenset(always), tuple((name, tuple((t, tuple(ix)) for t, ix in by.items())) for name, by in keyed.items())
        )

    return kept(_KINDS, kb, make, kind)


def best_rule(rec: Record, kb: KnowledgeBase) -> tuple[Rule, Match] | None:
    best: tuple[int, float, Rule, Match] | None = None
    texts: dict[str, str | None] = {}
    index = _kind_index(kb, rec.kind)
    tried = set(index.always)
    for name, by_text in index.keyed:
        text = texts[name] = field_text(rec, name)
        if text is not None:
            for needed, templates in by_text:
                if needed in text:
                    tried.update(templates)
    for i in sorted(tried):
        rule, m = index.entries[i]
        if matches(m, rec, texts):
            cand = (_priority(rule, m), m.confidence, rule, m)
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None or ("fallback" in best[2].tags and not best[3].settles):
        inferred = infer_rule(rec, kb)
        if inferred is not None:
            return inferred
    return (best[2], best[3]) if best else None


def _priority(rule: Rule, m: Match) -> int:
    return rule.priority if m.priority is None else m.priority


# Evidence below this does not name a cause; confidence of an inferred cause stays below any template's.
# Where a record was printed, not what it says: two records that differ only here match the same rule.
_POSITION = frozenset({"first_line", "last_line", "raw", "rank", "time"})


def _best_rules(records: list[Record], kb: KnowledgeBase) -> list[tuple[Rule, Match] | None]:
    """`best_rule` of each record, once per distinct content: a retry loop prints the same traceback
    thousands of times, and matching one against every rule's indicators costs milliseconds."""
    memo: dict[str, tuple[Rule, Match] | None] = {}
    out: list[tuple[Rule, Match] | None] = []
    for rec in records:
        key = repr([type(rec), *(getattr(rec, name) for name in type(rec).model_fields if name not in _POSITION)])
        if key not in memo:
            memo[key] = best_rule(rec, kb)
        out.append(memo[key])
    return out


def diagnose_records(records: list[Record], kb: KnowledgeBase) -> list[Incident]:
    """The match stage: which rule each record is evidence for, one incident per rule with its records' facts
    (`retry` from the match that found it), consequences folded into their causes, root cause first."""
    incidents: dict[str, Incident] = {}
    captures: dict[str, dict[str, str]] = {}
    strong: set[str] = set()  # incidents with evidence of their own, not only a weak match
    found_all = _best_rules(records, kb)
    templated: set[str] = set()  # incidents a template or record field matched: not inferred, whatever else joined them
    _explain_exceptions(records, found_all)
    _drop_chained_fallbacks(records, found_all, kb)
    within = _within_warnings(records)
    # the warnings, and the templates read off their text: what a run that went on printed (a record another grammar
    # reads inside a warning's lines, a kernel assert the warning's message ran on into, is evidence of its own)
    warned = {id(r) for r in records if id(r) in within and r.kind in ("exception", "message")}
    speaking: set[str] = set()  # incidents with evidence other than a warning's, or a warning that says its cause (warns)
    for rec, found in zip(records, found_all, strict=True):
        if found is None:
            continue
        rule, m = found
        if m.warns or id(rec) not in warned:
            speaking.add(rule.id)
        inc = incidents.get(rule.id)
        if inc is None:
            inc = incidents[rule.id] = Incident(rule=rule.id, title=rule.title, confidence=m.confidence, first_line=rec.first_line)
        if m.retry is not None and m.confidence >= inc.confidence:
            inc.facts["retry"] = m.retry
        if m.title is not None and m.confidence >= inc.confidence:
            inc.title = m.title
        inc.confidence = max(inc.confidence, m.confidence)
        inc.first_line = min(inc.first_line, rec.first_line)
        inc.records.append(rec)
        if not m.weak:
            strong.add(rule.id)
        captures.setdefault(rule.id, {}).update(captured(m, rec))
        if m.inferred_from:
            inc.facts.setdefault("inferred_from", m.inferred_from)
        else:
            templated.add(rule.id)
        inc.device_evidence = inc.device_evidence or rec.kind in DEVICE_KINDS
    for rule_id in templated:  # `inferred_from` marks an inferred cause only (README: confidence below 0.8)
        incidents[rule_id].facts.pop("inferred_from", None)
    if not any(id(rec) not in warned for rec, found in zip(records, found_all, strict=True) if found is not None):
        # nothing failed: only warnings were read, and the run went on after each (Match.warns)
        incidents = {rule_id: inc for rule_id, inc in incidents.items() if rule_id in speaking}
    locators = _locate_in_traceback(records, found_all, incidents)
    secondary = _secondary(records, within)
    for inc in incidents.values():
        inc.first_failure = first_failure(inc.records)
        # the Python exception the user saw names the error; C++ and CUDA records add what it lacks
        for rec in sorted(inc.records, key=lambda r: _fact_rank(r) + (0.5 if id(r) in secondary else 0)):
            said = rec.facts()
            if id(rec) in locators:  # it gives the error its frames, never a message
                said.pop("error_message", None)
            inc.facts = merge({"records": said}, inc.facts)
        inc.facts = merge({"records": cast(Facts, captures.get(inc.rule, {}))}, inc.facts)  # a rule's own named groups
    roots = _fold_consequences(list(incidents.values()), kb, {i for i in incidents if i not in strong})
    # device evidence first (it is the cause of what follows); the catch-all only after every named cause
    # a warning, or an exception another was raised while handling, is never the root of a later error's incident
    roots.sort(
        key=lambda i: (
            0 if i.device_evidence else 1,
            kb.tagged(i.rule, "fallback"),
            all(id(r) in secondary for r in i.records),
            i.first_line,
        )
    )
    for inc in roots:
        root_rule = kb.get(inc.rule)
        assert root_rule is not None
        inc.confidence = round(min(0.99, inc.confidence + 0.02 * len(inc.consequences)), 2)
        inc.facts.setdefault("retry", root_rule.retry)
        inc.checks = list(root_rule.checks)
    return roots


def _within_warnings(records: list[Record]) -> set[int]:
    """The records that start within a warning's lines (Python's `...Warning:`, its message's continuation lines
    included): the warning, the templates read off it, and what its message ran on into. One search per record in the
    warnings' spans merged in order (a log of thousands of warnings asked every span for every record, quadratically)."""
    merged: list[list[int]] = []
    warnings = (r for r in records if r.kind == "exception" and (getattr(r, "exc_type", "") or "").endswith("Warning"))
    for first, last in sorted((r.first_line, r.last_line) for r in warnings):
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    starts = [first for first, _ in merged]
    return {id(r) for r in records if (k := bisect_right(starts, r.first_line) - 1) >= 0 and r.first_line <= merged[k][1]}


def _secondary(records: list[Record], within: set[int]) -> set[int]:
    """Records that do not say why the job ended: warnings (printed before an error, often unrelated) and what starts
    within their lines (`within`), and an exception that another was raised while handling (`During handling of the
    above exception, another exception occurred`: the final error, `DataLoader worker (pid N) is killed by signal`, is
    what the job died of; the `EOFError` of the pipe it was reading is how it noticed)."""
    out = set(within)
    last_exc: Record | None = None
    for rec in records:
        if id(rec) in out:
            continue
        if rec.kind != "exception":
            continue
        if getattr(rec, "chained", None) == "context" and last_exc is not None:
            out.add(id(last_exc))
        last_exc = rec
    return out


def _fact_rank(rec: Record) -> int:
    """Whose facts win: the exception the user saw, then warnings, then the rest (C++, CUDA, templates)."""
    exc_type = getattr(rec, "exc_type", None) or ""
    if rec.kind != "exception" or not exc_type:
        return 2
    return 1 if exc_type.endswith("Warning") else 0


def _locate_in_traceback(records: list[Record], found: list[tuple[Rule, Match] | None], incidents: dict[str, Incident]) -> set[int]:
    """An error read from a line of its own (an anomaly-mode warning, a bare message) is located by the
    traceback that follows it when that traceback names no error of its own (it was cut off); so is an error whose
    own traceback holds only library frames (pasted from mid-stack), by a cut-off traceback chained after it. Returns the
    ids of those tracebacks: they give the error its frames, never a message (whatever followed the cut,
    training output say, was read as one)."""
    added: set[int] = set()
    located = {id(r) for inc in incidents.values() for r in inc.records if getattr(r, "user_frame", None)}
    for inc in incidents.values():
        if any(id(r) in located for r in inc.records):
            continue
        after = [
            rec
            for rec, hit in zip(records, found, strict=True)
            if hit is None and rec.kind == "exception" and rec.first_line >= inc.first_line and getattr(rec, "frames", None)
        ]
        if after:  # the last traceback printed is the error's own (an anomaly warning prints the forward call's first)
            inc.records.append(after[-1])
            added.add(id(after[-1]))
    return added


def _explain_exceptions(records: list[Record], found: list[tuple[Rule, Match] | None]) -> None:
    """A traceback and the records read from its own lines are one error: they share the rule of the
    most specific reading. `RuntimeError: CUDA error: CUBLAS_STATUS_...` is one line read by two
    grammars (the exception carries the type and the frames, the library record the meaning); a
    broadcast message inside a loss is read as a template and, with the frames, as a label/logits clash.
    """
    # the records by where they start, so each exception finds those on its own lines without reading them all
    by_line = sorted((r.first_line, j) for j, r in enumerate(records) if r.kind != "exception")
    starts = [no for no, _ in by_line]
    for i, rec in enumerate(records):
        if rec.kind != "exception" or (getattr(rec, "exc_type", "") or "").endswith("Warning"):
            continue  # a warning is not the error whose lines it shares
        own = _priority(*found[i]) if found[i] else -1  # type: ignore[misc]
        # a cause inferred from the exception's phrases yields to a specific cause a template reads off its lines
        # (MONAI's `ground truth has different shape` speaks for a channel clash; the sizes its template reads say)
        inferred = found[i] is not None and bool(found[i][1].inferred_from)  # type: ignore[index]
        best: tuple[Rule, Match] | None = None
        lo, hi = bisect_left(starts, rec.first_line - 3), bisect_right(starts, rec.last_line)
        # (another rank's record printed just before it is that rank's, not a reading of this error)
        near = sorted(j for _, j in by_line[lo:hi] if rec.rank is None or records[j].rank in (None, rec.rank))
        for j in near:
            cand = found[j]
            if cand is None or not (_priority(*cand) > own or (inferred and "fallback" not in cand[0].tags)):
                continue
            if best is None or _priority(*cand) > _priority(*best):
                best = cand
        if best is not None:
            found[i] = best
            continue
        for j in near:  # the exception's reading wins: its message's template record joins it
            cand = found[j]
            if (
                found[i] is not None
                and records[j].kind == "message"
                and rec.first_line <= records[j].first_line
                and (cand is None or _priority(*cand) < own)
            ):
                found[j] = found[i]


def _drop_chained_fallbacks(records: list[Record], found: list[tuple[Rule, Match] | None], kb: KnowledgeBase) -> None:
    """An exception only the catch-all reads, followed by one chained to it (`The above exception was the direct
    cause of ...`, `During handling of the above exception ...`) that a rule names, is part of that error: torch's
    DataLoader raises `DataLoader worker (pid(s) N) exited unexpectedly` from the `queue.Empty` of its timed-out
    read. It is no error of its own, so it opens no incident beside the one its chain names."""
    previous: int | None = None  # the last exception before this one
    for i, rec in enumerate(records):
        if rec.kind != "exception":
            continue
        hit = found[i]
        if (
            previous is not None
            and getattr(rec, "chained", None)
            and hit is not None
            and not kb.tagged(hit[0].id, "fallback")
            and (earlier := found[previous]) is not None
            and kb.tagged(earlier[0].id, "fallback")
        ):
            found[previous] = None
        previous = i


def _fold_consequences(incidents: list[Incident], kb: KnowledgeBase, weak: Set[str] = frozenset()) -> list[Incident]:
    """An incident whose rule lists a present cause in `consequence_of` is folded into it; one found only
    by weak evidence (`weak`: a bare exit status) folds under any other named cause, and is no cause itself."""
    by_id = {i.rule: i for i in incidents}
    folded: set[str] = set()
    for inc in sorted(incidents, key=lambda i: i.first_line):
        rule = kb.get(inc.rule)
        assert rule is not None
        causes = [by_id[c] for c in rule.consequence_of if c in by_id and c != inc.rule and c not in folded and c not in weak]
        if "*" in rule.consequence_of or inc.rule in weak:  # any named cause; the catch-all names none ...
            causes += [
                i
                for i in incidents
                if i.rule != inc.rule
                and i.rule not in folded
                and (i.rule not in weak or kb.tagged(inc.rule, "fallback"))  # the catch-all's weak evidence joins any cause
                and (inc.rule in weak or "*" not in getattr(kb.get(i.rule), "consequence_of", []))
                and not kb.tagged(i.rule, "fallback")
            ]
        if kb.tagged(inc.rule, "surfaces"):  # ... except a plain error where another process's failure showed
            causes += [i for i in incidents if kb.tagged(i.rule, "fallback") and i.rule not in folded | weak and _failed_first(i, inc)]
        if not causes:
            continue
        cause = min(causes, key=lambda i: (0 if i.device_evidence else 1, kb.tagged(i.rule, "fallback"), i.first_line))
        folded.add(inc.rule)
        ranks = sorted({r.rank for r in inc.records if r.rank is not None})
        cause.consequences.append(Consequence(rule=inc.rule, title=inc.title, first_line=inc.first_line, ranks=ranks, facts=inc.facts))
        # what surfaced the cause on its own rank completes it (the exception type, the user's frame);
        # another rank's timeout facts (op, seq) are that rank's and stay in its consequence
        cause_ranks = {r.rank for r in cause.records if r.rank is not None}
        cause.records.extend(inc.records)
        if cause.first_failure is not None and inc.first_failure is not None:  # the cause's own time must be known
            cause.first_failure = earlier(cause.first_failure, inc.first_failure)
        for rec in inc.records:
            if not cause_ranks or rec.rank is None or rec.rank in cause_ranks:
                cause.facts = merge({"records": rec.facts()}, cause.facts)
    return [i for i in incidents if i.rule not in folded]


def _failed_first(error: Incident, waiting: Incident) -> bool:
    """Whether a plain error is the cause of where its process's failure showed (a `surfaces` rule): the other ranks'
    collective timeouts after `[rank2]: IndexError: list index out of range`, a DataLoader's `worker exited unexpectedly`
    after the worker's own traceback. The error is printed before them, or is another rank's than those that waited
    (ranks' output interleaves in any order)."""
    raised = any(r.kind == "exception" and (t := getattr(r, "exc_type", "") or "") and not t.endswith("Warning") for r in error.records)
    if not raised:  # (a C++ frame or a launcher's table is no error of a process)
        return False
    mine = {r.rank for r in error.records if r.rank is not None}
    theirs = {r.rank for r in waiting.records if r.rank is not None}
    return error.first_line < waiting.first_line or bool(mine and theirs and mine.isdisjoint(theirs))


def first_failure(records: Sequence[Record]) -> FirstFailure | None:
    """The earliest time-stamped failure among the records (a warning is not a failure)."""
    failures = {
        rec.time: rec
        for rec in reversed(records)
        if rec.time is not None and rec.kind != "arch_warning" and not (getattr(rec, "exc_type", None) or "").endswith("Warning")
    }
    first = earliest(failures)
    if first is None:
        return None
    rec = failures[first]
    return FirstFailure(rank=rec.failed_rank_of(), time=first.text, at=first.at, line=rec.first_line)


def earlier(a: FirstFailure, b: FirstFailure) -> FirstFailure:
    """The earlier of two first failures (of two ranks, or of two inputs of one job)."""
    first = earliest([Stamp(a.time, a.at), Stamp(b.time, b.at)])
    return a if first == Stamp(a.time, a.at) else b
