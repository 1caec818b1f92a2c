"""`kbdebug rules show ID`: what a rule matches, its examples, and its guide filled from its first positive example."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Rule
from kbdebug.render import md_code, md_fence

# Fields that say who the rule is or how it guides; every other field (match, indicators, relations,
# consequence_of, whatever the model gains) is part of what it matches and is shown as is.
_NOT_MATCHING = frozenset({"id", "title", "guide", "examples", "references", "commands", "facts", "checks"})


def show_rule(rule: Rule, kb: KnowledgeBase, kb_dirs: list[Path] | None, fmt: str = "text", width: int = 100) -> str:
    """The rule's matching data and examples, then its guide rendered as a diagnosis of its first positive example."""
    from kbdebug.api import diagnose_text
    from kbdebug.diagnoser.guides import filled
    from kbdebug.diagnosis import Diagnosis, Incident
    from kbdebug.render import render

    data = rule.model_dump(exclude_defaults=True, exclude={"examples_table"})
    lines = [f"{rule.id}: {rule.title}", f"  file: {kb.sources.get(rule.id, '?')}", "", "Matches:"]
    for key, value in data.items():
        if key in _NOT_MATCHING:
            continue
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"  {key}: {_compact(item)}")
    examples = rule.examples.model_dump(exclude_defaults=True)
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
        incident = filled(Incident(rule=rule.id, title=rule.title, confidence=1.0, checks=rule.checks), rule)
        note = "Guide (no positive example to fill it from: facts are empty):"
    else:
        note = "Guide, rendered on the first positive example:"
    diag = Diagnosis(source="first positive example", incidents=[incident])
    if fmt == "json":  # the whole output stays one JSON document
        guide = render([diag], fmt, width=width)
        return (
            json.dumps(
                {"rule": data, "source": str(kb.sources.get(rule.id, "")), "example": json.loads(guide)}, indent=2, ensure_ascii=False
            )
            + "\n"
        )
    if fmt == "markdown":
        return _markdown(lines, note) + render([diag], fmt, width=width)
    if fmt == "html":  # one document: the rule's matching data, then the guide's sections
        rule_part = f'<section class="rule"><h2>{html.escape(lines[0])}</h2><pre>{html.escape(chr(10).join(lines[1:]))}</pre>'
        return (
            render([], fmt, part="head")
            + rule_part
            + f"<p>{html.escape(note)}</p></section>\n"
            + render([diag], fmt, part="body")
            + render([], fmt, part="foot")
        )
    lines += ["", note, ""]
    return "\n".join(lines) + "\n" + render([diag], fmt, width=width)


def _markdown(lines: list[str], note: str) -> str:
    """The text form's head as Markdown: a heading, the matching data as a list, each example fenced."""
    out = [f"## {lines[0]}", ""]
    block: list[str] = []
    for line in lines[1:]:
        if line.startswith("    | "):
            block.append(line[6:])
            continue
        if block:
            fence = md_fence(block)
            out += ["", f"{fence}text", *block, fence, ""]
            block = []
        if not line:
            continue
        if line.startswith("  "):
            key, _, value = line.strip().partition(": ")
            out.append(f"- {key}: {md_code(value)}" if value else f"- {key}")
        else:
            out += ["", f"**{line.rstrip(':')}**", ""]
    if block:
        fence = md_fence(block)
        out += ["", f"{fence}text", *block, fence]
    return "\n".join(out) + f"\n\n*{note}*\n\n"


def _compact(value: Any, top: bool = True) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_compact(v, False)}" for k, v in value.items())
        return inner if top else "{ " + inner + " }"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
