"""Render diagnoses as text, Markdown, JSON and HTML: presentation only, never a change to a diagnosis."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import jinja2

from kbdebug._resources import output_formats
from kbdebug.diagnosis import Diagnosis
from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.render import markup
from kbdebug.render.evidence import evidence, split_highlight
from kbdebug.render.tensors import tensor_rows
from kbdebug.render.words import consequence_summary, incident_json, retry_line
from kbdebug.templating import bytecode_cache, code_span

FORMATS = output_formats()  # a format is its templates: report.NAME.j2 and summary.NAME.j2 (kbdebug._resources)


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kbdebug", "render/templates"),
        bytecode_cache=bytecode_cache(),
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md_inline"] = _md_inline
    env.filters["md_code"] = md_code
    env.globals["md_fence"] = md_fence
    return env


def md_fence(rows: list[Any]) -> str:
    """A code-block fence longer than any backtick run in the log lines it holds (at least ```)."""
    runs = [len(run) for row in rows for run in re.findall(r"`+", str(getattr(row, "text", row)))]
    return "`" * max(3, max(runs, default=0) + 1)


def md_code(value: Any, table: bool = False) -> str:
    """A log-derived value as a Markdown code span whose fence is longer than any backtick run inside it,
    so `<details>`, `<img>` or backticks in a message show as text wherever the report is pasted."""
    text = " ".join(str(value).split())
    text = text.replace("|", "\\|") if table else text  # a table cell ends at a bare pipe, even in a code span
    return code_span(text)


def _md_inline(text: str) -> str:
    return re.sub(r"`([^`]+)`", r"\1", text)


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


def render(diags: Sequence[Diagnosis], fmt: str = "text", color: bool = False, width: int = 100, part: str = "all") -> str:
    """The diagnoses in one format; `width` is the text format's line width (the terminal's on a TTY).

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
        evidence=evidence,
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
