"""Fill each rule's guide with the incident's facts and render diagnoses (text, markdown, json, html)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from functools import cache
from typing import Any

import jinja2
import jinja2.bccache

from kbdebug._cache import module_source, private_dir
from kbdebug.diagnosis import Diagnosis, Incident
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Rule
from kbdebug.render import markup
from kbdebug.render.evidence import evidence, split_highlight
from kbdebug.render.tensors import tensor_rows

FORMATS = ("text", "markdown", "json", "html")
# What rerunning does, said once at the top of every guide (rule-ids.md's `retry`), in one place for all formats.
RETRY_LINES = {
    "no": "Rerun: no — a bug in code or data fails the same way again.",
    "smaller": "Rerun: with less — out of a resource: rerun with less memory, batch, workers or shm, or on a larger machine.",
    "yes": "Rerun: yes — the infrastructure failed, not the job: rerun as is, preferably on another node.",
    "after-install": "Rerun: after fixing the environment — install or rebuild what is missing, then rerun.",
}
SECTIONS = (("what", "What it means"), ("why", "Why it happens"), ("confirm", "How to confirm"), ("fix", "How to fix"))


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """A cache that cannot be written (read-only home, full disk) is no cache, not an error."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            bucket.reset()


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs: compiling them is a few percent of a cold explain."""
    # compiled templates are code: only from a directory nobody else can write; and their bytecode depends on
    # this module's environment settings (finalize, filters), not only on the template text, hence the key
    key = hashlib.sha256(f"{jinja2.__version__}|{sys.version}|{module_source(__name__)}".encode()).hexdigest()[:12]
    where = private_dir(f"jinja-{key}")
    return _QuietBytecodeCache(str(where)) if where is not None else None


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kbdebug", "render/templates"),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md_inline"] = _md_inline
    env.filters["md_code"] = md_code
    env.globals["md_fence"] = md_fence
    return env


@cache
def _fragment_env() -> jinja2.Environment:
    # A rule's guide fragment is its own template name, so fragments share the bytecode cache too.
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda source: (source, None, lambda: True)),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.ChainableUndefined,
        autoescape=False,
        finalize=_guide_value,
    )


def _guide_value(value: Any) -> Any:
    """A value read from the log, put into a guide (Markdown, usually inside a `code span`): a backtick in
    it would end the span and let the rest render as Markdown or HTML, so it becomes a look-alike."""
    return value.replace("`", "\u02cb") if isinstance(value, str) else value


def md_fence(rows: list[Any]) -> str:
    """A code-block fence longer than any backtick run in the log lines it holds (at least ```)."""
    runs = [len(run) for row in rows for run in re.findall(r"`+", str(getattr(row, "text", row)))]
    return "`" * max(3, max(runs, default=0) + 1)


def md_code(value: Any, table: bool = False) -> str:
    """A log-derived value as a Markdown code span whose fence is longer than any backtick run inside it,
    so `<details>`, `<img>` or backticks in a message show as text wherever the report is pasted."""
    text = " ".join(str(value).split())
    text = text.replace("|", "\\|") if table else text  # a table cell ends at a bare pipe, even in a code span
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_inline(text: str) -> str:
    return re.sub(r"`([^`]+)`", r"\1", text)


def fill_text(template: str, facts: dict[str, Any]) -> str:
    try:
        return _fragment_env().get_template(template).render(**facts).strip()
    except (jinja2.TemplateError, SyntaxError, TypeError, ValueError, ArithmeticError) as exc:
        # a guide that cannot render (a user's template, an odd fact value) still leaves a readable report
        return f"{template} (template error: {type(exc).__name__}: {exc})"


def _script(facts: dict[str, Any]) -> str:
    frame = facts.get("innermost_user_frame") or ""
    return frame.rsplit(":", 1)[0] if frame.endswith(tuple("0123456789")) and ".py" in frame else "train.py"


def fill(diag: Diagnosis, kb: KnowledgeBase) -> Diagnosis:
    for inc in diag.incidents:
        rule = kb.get(inc.rule)
        if rule is not None:
            fill_incident(inc, rule)
    return diag


def fill_incident(inc: Incident, rule: Rule) -> None:
    ctx = {"script": _script(inc.facts), **inc.facts}
    for key, tmpl in rule.facts.items():
        inc.facts.setdefault(key, fill_text(tmpl, ctx))
    inc.guide = {key: fill_text(getattr(rule.guide, key), ctx) for key, _ in SECTIONS}
    inc.commands = [fill_text(c, ctx) for c in rule.commands]
    inc.references = list(rule.references)
    inc.retry = inc.facts.get("retry") if inc.facts.get("retry") in RETRY_LINES else None
    head = [RETRY_LINES[inc.retry]] if inc.retry else []
    inc.fix = "\n\n".join([*head, *(f"{title}: {inc.guide[key]}" for key, title in SECTIONS)])


# The version of the JSON contract (docs/json.md): raised when a key changes meaning or goes away,
# not when one is added, so a reader can check `schema_version` and rely on the keys it knows.
JSON_SCHEMA_VERSION = 1


def _json_object(diag: Diagnosis) -> dict[str, Any]:
    return {"schema_version": JSON_SCHEMA_VERSION, **diag.to_json()}


def json_line(diag: Diagnosis) -> str:
    """One diagnosis as one line of JSON: the form of several inputs, one object per line."""
    return json.dumps(_json_object(diag), ensure_ascii=False) + "\n"


def render(diags: list[Diagnosis], fmt: str = "text", color: bool = False, width: int = 100) -> str:
    """The diagnoses in one format; `width` is the text format's line width (the terminal's on a TTY)."""
    if fmt == "json":
        if len(diags) == 1:
            return json.dumps(_json_object(diags[0]), indent=2, ensure_ascii=False) + "\n"
        return "".join(json_line(d) for d in diags)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    template = _env().get_template(f"{fmt}.j2")
    style = _Style(color)
    guide_text = (lambda text: markup.to_terminal(text, max(width, 40) - 2)) if color else markup.to_plain
    return template.render(
        diags=diags,
        sections=SECTIONS,
        retry_lines=RETRY_LINES,
        s=style,
        fact_rows=_fact_rows,
        evidence=evidence,
        split=split_highlight,
        tensor_rows=tensor_rows,
        md_html=markup.to_html,
        md_inline_html=markup.to_html_inline,
        guide_text=guide_text,
        width=max(width, 40),
    )


_TABLES = ("frame_tensors",)  # facts shown as their own table, not as a row


def _fact_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
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
