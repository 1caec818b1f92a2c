"""`kbdebug rules show ID`: what a rule matches, its examples, and its guide filled from its first positive example."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Rule

# Fields that say who the rule is or how it guides; every other field (match, indicators, relations,
# consequence_of, whatever the model gains) is part of what it matches and is shown as is.
_NOT_MATCHING = frozenset({"id", "title", "guide", "examples", "references", "commands", "facts", "checks"})


def show_rule(rule: Rule, kb: KnowledgeBase, kb_dirs: list[Path] | None, fmt: str = "text", width: int = 100) -> str:
    """The rule's matching data and examples, then its guide rendered as a diagnosis of its first positive example."""
    from kbdebug.api import diagnose_text
    from kbdebug.diagnoser.guides import fill_incident
    from kbdebug.diagnosis import Diagnosis, Incident
    from kbdebug.render import render

    data = rule.model_dump(exclude_defaults=True)
    lines = [f"{rule.id}: {rule.title}", f"  file: {kb.sources.get(rule.id, '?')}", "", "Matches:"]
    for key, value in data.items():
        if key in _NOT_MATCHING:
            continue
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"  {key}: {_compact(item)}")
    examples = data.get("examples") or {}
    positive = list(examples.get("positive", [])) if isinstance(examples, dict) else []
    if examples:
        lines += ["", "Examples:"]
        for kind, snippets in examples.items():
            for snippet in snippets if isinstance(snippets, list) else [snippets]:
                lines.append(f"  {kind}:")
                lines += [f"    | {line}" for line in str(snippet).rstrip().splitlines()]
    incident = None
    for snippet in positive[:1]:
        found = diagnose_text(snippet, source="first positive example", kb_dirs=kb_dirs)
        incident = next((i for i in found.incidents if i.rule == rule.id), None)
    if incident is None:
        incident = Incident(rule=rule.id, title=rule.title, confidence=1.0, checks=rule.checks)
        fill_incident(incident, rule)
        note = "Guide (no positive example to fill it from: facts are empty):"
    else:
        note = "Guide, rendered on the first positive example:"
    lines += ["", note, ""]
    guide = render([Diagnosis(source="first positive example", incidents=[incident])], fmt, width=width)
    if fmt == "json":  # the whole output stays one JSON document
        return (
            json.dumps(
                {"rule": data, "source": str(kb.sources.get(rule.id, "")), "example": json.loads(guide)}, indent=2, ensure_ascii=False
            )
            + "\n"
        )
    return "\n".join(lines) + "\n" + guide


def _compact(value: Any, top: bool = True) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_compact(v, False)}" for k, v in value.items())
        return inner if top else "{ " + inner + " }"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
