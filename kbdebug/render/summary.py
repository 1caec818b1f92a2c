"""The table that ends a run over many logs: one row per distinct crash (signature), most frequent first.

What the table holds is worked out here once; how each format lays it out is its template,
kbdebug/render/templates/summary.NAME.j2 (an output format is its templates: kbdebug._resources.output_formats)."""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence

from kbdebug.core.term import PIPED_WIDTH
from kbdebug.diagnoser.crashes import first_failure, group
from kbdebug.diagnosis import Diagnosis
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.render import FORMATS, JSON_SCHEMA_VERSION, dumps, markup
from kbdebug.render.environment import _env, md_code

EXAMPLES = 3


def render_summary(diags: Sequence[Diagnosis], fmt: str, width: int = PIPED_WIDTH, kb: KnowledgeBase | None = None) -> str:
    """The table of crash groups; the text form's lines fit `width` (100 when piped, as the report's).
    `kb` says which rules are collectives, folded across the inputs (see `group`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    groups, nothing = group(list(diags), kb)
    first = first_failure(list(diags))
    head = f"{len(diags)} logs, {len(groups)} distinct crash{'es' if len(groups) != 1 else ''}" + (
        f", nothing recognised in {len(nothing)}" if nothing else ""
    )
    return (
        _env()
        .get_template(f"summary.{fmt}.j2")
        .render(
            diags=diags,
            groups=groups,
            nothing=nothing,
            first=first,
            head=head,
            said=f"First failure: {first.describe()}" if first else "",
            unread=", ".join(nothing[:EXAMPLES]) + (f" (+{len(nothing) - EXAMPLES} more)" if len(nothing) > EXAMPLES else ""),
            examples=EXAMPLES,
            schema_version=JSON_SCHEMA_VERSION,
            dumps=dumps,
            esc=html.escape,
            md_code=md_code,
            cell=lambda text: text.replace("|", "\\|"),  # a Markdown line in a table cell: only its delimiter escaped
            md_inline_html=markup.to_html_inline,
            plain=markup.to_plain,
            fit=lambda text: text if len(text) <= width else text[: max(width - 1, 1)].rstrip() + "…",
            wrap=lambda text, indent: textwrap.wrap(text, max(width, 40), subsequent_indent=indent, break_on_hyphens=False) or [text],
        )
    )
