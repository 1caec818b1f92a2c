"""Render diagnoses as text, Markdown, JSON and HTML: presentation only, never a change to a diagnosis."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kbdebug._resources import output_formats
from kbdebug.diagnosis import Diagnosis
from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.render import markup
from kbdebug.render.environment import _env
from kbdebug.render.evidence import evidence as evidence_blocks
from kbdebug.render.evidence import split_highlight
from kbdebug.render.tensors import tensor_rows
from kbdebug.render.words import consequence_summary, incident_json, retry_line

FORMATS = output_formats()  # a format is its templates: report.NAME.j2 and summary.NAME.j2 (kbdebug._resources)


# The version of the JSON contract (docs/json.md): raised when a key changes meaning or goes away,
# not when one is added, so a reader can check `schema_version` and rely on the keys it knows.
JSON_SCHEMA_VERSION = 1


def json_object(diag: Diagnosis) -> dict[str, Any]:
    """A diagnosis as docs/json.md's contract says it."""
    data = diag.model_dump(mode="json", exclude={"lines", "incidents"})
    incidents = [incident_json(i) for i in diag.incidents]
    return {"schema_version": JSON_SCHEMA_VERSION, "source": data.pop("source"), "incidents": incidents, **data}


def dumps(obj: Any, indent: int | None = None) -> str:
    """JSON as kbdebug writes it: the text as is (not ASCII-escaped)."""
    return json.dumps(obj, indent=indent, ensure_ascii=False)


def render(
    diags: Sequence[Diagnosis],
    fmt: str = "text",
    color: bool = False,
    width: int = 100,
    part: str = "all",
    facts: bool = False,
    evidence: bool = True,
) -> str:
    """The diagnoses in one format; `width` is the text format's line width (the terminal's on a TTY).

    The text format shows the cause, what it means, the fix and the evidence; the table of every fact read
    (templates, shape relations: the reasoning's inputs) only with `facts=True` (`--facts`). Markdown, HTML
    and JSON always carry them: a pasted issue or a tool reads them there. `evidence=False` leaves the log lines
    out of the text, for an excepthook that printed the traceback just above.

    `part` ("head", "body", "foot"; HTML only) lets many logs stream into one document: the head once,
    each log's sections as they are ready, the summary, then the foot."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    template = _env().get_template(f"report.{fmt}.j2")
    style = _Style(color)
    guide_text = (lambda text: markup.to_terminal(text, max(width, 40) - 2)) if color else markup.to_plain
    return template.render(
        diags=diags,
        sections=SECTIONS,
        s=style,
        fact_rows=fact_rows,
        evidence=evidence_blocks,
        split=split_highlight,
        tensor_rows=tensor_rows,
        retry_line=retry_line,
        consequence_summary=consequence_summary,
        md_html=markup.to_html,
        md_inline_html=markup.to_html_inline,
        guide_text=guide_text,
        width=max(width, 40),
        part=part,
        dumps=dumps,
        json_object=json_object,
        show_facts=facts,
        show_evidence=evidence,
    )


_TABLES = ("frame_tensors",)  # facts shown as their own table, not as a row


def fact_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for key, val in facts.items():
        if key in _TABLES:
            continue
        if val is None or val == "" or isinstance(val, bool):
            continue
        if isinstance(val, list):
            val = "[" + ", ".join(str(v) for v in val) + "]"
        rows.append((key, str(val)))
    return rows


class _Style:
    """ANSI styling for the text format; plain strings when colour is off."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("1;31", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)
