"""The one jinja2 environment of the report templates (kbdebug/render/templates: every output format's and
the words a report says), with the filters that keep a log's text as it was printed."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from kbdebug.core.templating import ShippedTemplates, bytecode_cache, code_span

COMPILED = Path(__file__).resolve().parent / "templates" / "compiled.json"  # python -m kbdebug.render writes it


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kbdebug", "render/templates"),
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        optimized=False,  # constant folding at compile time: a quarter of compiling a template, for no constant to fold
    )
    env.filters["md_inline"] = _md_inline
    env.filters["md_code"] = md_code
    env.globals["md_fence"] = md_fence
    env.bytecode_cache = ShippedTemplates(bytecode_cache(), COMPILED, env)  # set last: it reads the filters
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
