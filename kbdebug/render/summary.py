"""The table that ends a run over many logs: one row per distinct crash (signature), most frequent first."""

from __future__ import annotations

import html
import json
import textwrap
from typing import Any

from kbdebug.diagnoser.crashes import first_failure, group
from kbdebug.diagnosis import Diagnosis
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.render import JSON_SCHEMA_VERSION, markup, md_code
from kbdebug.term import PIPED_WIDTH

EXAMPLES = 3


def _fit(text: str, room: int) -> str:
    """One line cut to the width (the group's first guide sentence: the whole guide is above)."""
    return text if len(text) <= room else text[: max(room - 1, 1)].rstrip() + "…"


def _wrap(text: str, room: int, indent: str) -> list[str]:
    """Names (files, ranks) wrapped, never cut: each line within the width, continued under `indent`."""
    return textwrap.wrap(text, max(room, 40), subsequent_indent=indent, break_on_hyphens=False) or [text]


def render_summary(diags: list[Diagnosis], fmt: str, width: int = PIPED_WIDTH, kb: KnowledgeBase | None = None) -> str:
    """The table of crash groups; the text form's lines fit `width` (100 when piped, as the report's).
    `kb` says which rules are collectives, folded across the inputs (see `group`)."""
    groups, nothing = group(diags, kb)
    first = first_failure(diags)
    if fmt == "json":
        obj: dict[str, Any] = {
            "schema_version": JSON_SCHEMA_VERSION,
            "summary": {
                "logs": len(diags),
                "crashes": len(groups),
                "nothing_recognised": nothing,
                "first_failure": first.model_dump(mode="json") if first else None,
                "groups": [
                    {
                        "signature": g.signature,
                        "signature_key": g.signature_key,
                        "rule": g.rule,
                        "title": g.title,
                        "count": len(g.members),
                        "first_guide_line": g.first_guide_line,
                        "members": g.members,
                        "waiting": g.waiting,
                    }
                    for g in groups
                ],
            },
        }
        return json.dumps(obj, ensure_ascii=False) + "\n"
    head = f"{len(diags)} logs, {len(groups)} distinct crash{'es' if len(groups) != 1 else ''}" + (
        f", nothing recognised in {len(nothing)}" if nothing else ""
    )
    unread = ", ".join(nothing[:EXAMPLES]) + (f" (+{len(nothing) - EXAMPLES} more)" if len(nothing) > EXAMPLES else "")
    said = f"First failure: {first.describe()}" if first else ""
    if fmt == "markdown":
        rows = [f"### Summary: {head}", "", *([_md(said), ""] if said else [])]
        if nothing:
            rows += [f"Nothing recognised in: {', '.join(md_code(n) for n in nothing[:EXAMPLES])}{' …' * (len(nothing) > EXAMPLES)}", ""]
        rows += ["| count | rule | what | signature | examples |", "|---:|---|---|---|---|"]
        rows += [
            f"| {len(g.members)} | `{g.rule}` | {_md(g.first_guide_line)} | `{g.signature}` | "
            f"{', '.join(md_code(m, table=True) for m in g.members[:EXAMPLES])}{' …' if len(g.members) > EXAMPLES else ''}"
            f"{'; waiting on it: ' + ', '.join(md_code(m, table=True) for m in g.waiting) if g.waiting else ''} |"
            for g in groups
        ]
        return "\n".join(rows) + "\n"
    if fmt == "html":
        body = "".join(
            f"<tr><td>{len(g.members)}</td><td><code>{html.escape(g.rule)}</code></td><td>{markup.to_html_inline(g.first_guide_line)}</td>"
            f"<td><code>{g.signature}</code></td><td>{html.escape(', '.join(g.members[:EXAMPLES]))}"
            f"{'; waiting on it: ' + html.escape(', '.join(g.waiting)) if g.waiting else ''}</td></tr>"
            for g in groups
        )
        return (
            f'<section class="summary"><h2>Summary: {html.escape(head)}</h2>'
            + (f'<p class="first-failure">{html.escape(said)}</p>' if said else "")
            + (f'<p class="nothing">Nothing recognised in: {html.escape(unread)}</p>' if nothing else "")
            + "<table><thead><tr><th>count</th><th>rule</th>"
            f"<th>what</th><th>signature</th><th>examples</th></tr></thead><tbody>{body}</tbody></table></section>\n"
        )
    lines = _wrap(f"summary: {head}", width, "  ") + (_wrap(f"  {said}", width, "    ") if said else [])
    if nothing:
        lines += _wrap(f"  nothing recognised in: {unread}", width, "    ")
    for g in groups:
        more = f" (+{len(g.members) - EXAMPLES} more)" if len(g.members) > EXAMPLES else ""
        lines.append(_fit(f"  {len(g.members):5d}  {g.rule}  [{g.signature}]", width))
        lines.append(_fit(f"         {markup.to_plain(g.first_guide_line)}", width))
        lines += _wrap(f"         e.g. {', '.join(g.members[:EXAMPLES])}{more}", width, "              ")
        if g.waiting:
            lines += _wrap(f"         other ranks waiting on it (collective timeouts): {', '.join(g.waiting)}", width, "              ")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """A Markdown line put into a table cell: only the cell's own delimiter needs escaping."""
    return text.replace("|", "\\|")
