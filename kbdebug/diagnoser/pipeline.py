"""The one composition of the diagnose stage, for a log and for a live exception alike.

Each stage takes values and returns values, and each is visited once, in order:
match (records -> incidents, root first, with their records' facts) -> lines (the log lines near them) ->
for each incident, with its rule looked up once by id: context (the facts of every producer merged by
kbdebug.core.facts.PRECEDENCE, then the context derived from them) -> guides (the rule's facts, guide and commands
filled once from those facts) -> signature.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.core.facts import Facts
from kbdebug.diagnoser.context import in_context, log_launcher
from kbdebug.diagnoser.guides import filled
from kbdebug.diagnoser.lines import lines_near
from kbdebug.diagnoser.match import diagnose_records
from kbdebug.diagnoser.signature import signed
from kbdebug.diagnosis import Diagnosis, Incident, LiveEvidence, LiveSite
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.records import Record


def diagnose(
    records: list[Record],
    kb: KnowledgeBase,
    source: str,
    lines: Iterable[tuple[int, str]],
    *,
    origin: str = "log",
    caller: Facts | None = None,
    live: LiveEvidence | None = None,
) -> Diagnosis:
    """Match the records, keep the lines near them, and complete the incidents. `live` is what a live
    exception's objects said (kbdebug.runtime.live), read before: the guides quote those facts."""
    incidents = diagnose_records(records, kb)
    return complete(incidents, kb, source, origin, caller, live, lines=lines_near(incidents, lines))


def complete(
    incidents: list[Incident],
    kb: KnowledgeBase,
    source: str,
    origin: str = "log",
    caller: Facts | None = None,
    live: LiveEvidence | None = None,
    *,
    guard: Facts | None = None,
    lines: dict[int, str] | None = None,
) -> Diagnosis:
    """Each incident in its context, its guide filled, its signature made: a finished Diagnosis.

    `origin` says where the text came from ("log", "script", "run", "rerun"; see kbdebug.diagnoser.context),
    `caller` what the caller knows (the command's `script`), `guard` what kbdebug.guard() reported."""
    launcher = log_launcher(incidents) if origin in ("log", "run", "rerun") else None
    rules = [kb.get(inc.rule) for inc in incidents]  # each incident's rule, looked up once
    sites = [live.site_of(inc.records) if live is not None else LiveSite() for inc in incidents]
    placed = [
        in_context(inc, rule, origin, {"live": site.facts, "guard": guard or {}, "records": inc.facts, "caller": caller or {}}, launcher)
        for inc, rule, site in zip(incidents, rules, sites, strict=True)
    ]
    guided = [filled(inc, rule) for inc, rule in zip(placed, rules, strict=True)]
    diag = Diagnosis(source=source, incidents=[signed(inc, rule) for inc, rule in zip(guided, rules, strict=True)], lines=lines or {})
    inputs: dict[str, object] = {}
    for site in sites:
        for key, val in site.inputs.items():
            inputs.setdefault(key, val)
    if inputs:
        diag.keep_inputs(inputs)
    return diag
