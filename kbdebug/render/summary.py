"""The table that ends a run over many logs: one row per distinct crash (signature), most frequent first."""

from __future__ import annotations

import html
import json
from typing import Any

from kbdebug.diagnoser.crashes import first_failure, group
from kbdebug.diagnosis import Diagnosis
from kbdebug.render import JSON_SCHEMA_VERSION

EXAMPLES = 3


def render_summary(diags: list[Diagnosis], fmt: str) -> str:
    groups, nothing = group(diags)
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
                    }
                    for g in groups
                ],
            },
        }
        return json.dumps(obj, ensure_ascii=False) + "\n"
    head = f"{len(diags)} logs, {len(groups)} distinct crash{'es' if len(groups) != 1 else ''}" + (
        f", nothing recognised in {len(nothing)}" if nothing else ""
    )
    said = f"First failure: {first.describe()}" if first else ""
    if fmt == "markdown":
        rows = [f"### Summary: {head}", "", *([_md(said), ""] if said else [])]
        rows += ["| count | rule | what | signature | examples |", "|---:|---|---|---|---|"]
        rows += [
            f"| {len(g.members)} | `{g.rule}` | {_md(g.first_guide_line)} | `{g.signature}` | "
            f"{', '.join(_md(m) for m in g.members[:EXAMPLES])}{' …' if len(g.members) > EXAMPLES else ''} |"
            for g in groups
        ]
        return "\n".join(rows) + "\n"
    if fmt == "html":
        body = "".join(
            f"<tr><td>{len(g.members)}</td><td><code>{html.escape(g.rule)}</code></td><td>{html.escape(g.first_guide_line)}</td>"
            f"<td><code>{g.signature}</code></td><td>{html.escape(', '.join(g.members[:EXAMPLES]))}</td></tr>"
            for g in groups
        )
        return (
            f'<section class="summary"><h2>Summary: {html.escape(head)}</h2>'
            + (f'<p class="first-failure">{html.escape(said)}</p>' if said else "")
            + "<table><thead><tr><th>count</th><th>rule</th>"
            f"<th>what</th><th>signature</th><th>examples</th></tr></thead><tbody>{body}</tbody></table></section>\n"
        )
    lines = [f"summary: {head}", *([f"  {said}"] if said else [])]
    for g in groups:
        more = f" (+{len(g.members) - EXAMPLES} more)" if len(g.members) > EXAMPLES else ""
        lines.append(f"  {len(g.members):5d}  {g.rule}  [{g.signature}]  {g.first_guide_line}")
        lines.append(f"         e.g. {', '.join(g.members[:EXAMPLES])}{more}")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")
