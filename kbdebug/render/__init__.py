"""Fill each rule's guide with the incident's facts and render diagnoses (text, markdown, json, html)."""

from __future__ import annotations

import contextvars
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


_QUOTED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("kbdebug_quoted", default=None)
_SLOT = re.compile("\x00(\\d+)\x00")
_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


def _guide_value(value: Any) -> Any:
    """A value read from the log, put into a guide: one holding a backtick or a `<` stands in as a slot,
    filled once the guide is rendered (see `_fill_slots`), so the user's own text stays copyable as is."""
    quoted = _QUOTED.get()
    if quoted is None or not isinstance(value, str) or not any(c in value for c in "`<"):
        return value
    quoted.append(value)
    return f"\x00{len(quoted) - 1}\x00"


def _fill_slots(text: str, quoted: list[str], markdown: bool) -> str:
    """Put the log's values back. In Markdown a code span holding one gets a fence longer than any backtick
    run inside it (CommonMark's rule), so the message reads and copies as the log printed it; elsewhere its
    backticks and `<` are backslash-escaped. Facts and commands are not Markdown: values go back as they are."""
    put = lambda m: quoted[int(m.group(1))]  # noqa: E731
    if not markdown:
        return _SLOT.sub(put, text)

    def span(m: re.Match[str]) -> str:
        body = m.group(2)
        return md_code(_SLOT.sub(put, body), keep_space=True) if _SLOT.search(body) else m.group(0)

    out = _SPAN.sub(span, text)
    return _SLOT.sub(lambda m: re.sub(r"([`<])", r"\\\1", quoted[int(m.group(1))]), out)


def md_fence(rows: list[Any]) -> str:
    """A code-block fence longer than any backtick run in the log lines it holds (at least ```)."""
    runs = [len(run) for row in rows for run in re.findall(r"`+", str(getattr(row, "text", row)))]
    return "`" * max(3, max(runs, default=0) + 1)


def md_code(value: Any, table: bool = False, keep_space: bool = False) -> str:
    """A log-derived value as a Markdown code span whose fence is longer than any backtick run inside it,
    so `<details>`, `<img>` or backticks in a message show as text wherever the report is pasted."""
    text = str(value) if keep_space else " ".join(str(value).split())
    text = text.replace("|", "\\|") if table else text  # a table cell ends at a bare pipe, even in a code span
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_inline(text: str) -> str:
    return re.sub(r"`([^`]+)`", r"\1", text)


def fill_text(template: str, facts: dict[str, Any], markdown: bool = False) -> str:
    """A rule's template filled with the facts; `markdown`: it is a guide section (see `_fill_slots`)."""
    quoted: list[str] = []
    token = _QUOTED.set(quoted)
    try:
        return _fill_slots(_fragment_env().get_template(template).render(**facts).strip(), quoted, markdown)
    except (jinja2.TemplateError, SyntaxError, TypeError, ValueError, ArithmeticError) as exc:
        # a guide that cannot render (a user's template, an odd fact value) still leaves a readable report
        return f"{template} (template error: {type(exc).__name__}: {exc})"
    finally:
        _QUOTED.reset(token)


def script_name(facts: dict[str, Any]) -> str:
    """The script a rerun command names: the user's frame's file, else `train.py`."""
    frame = facts.get("innermost_user_frame") or ""
    return frame.rsplit(":", 1)[0] if frame.endswith(tuple("0123456789")) and ".py" in frame else "train.py"


def fill(diag: Diagnosis, kb: KnowledgeBase) -> Diagnosis:
    for inc in diag.incidents:
        rule = kb.get(inc.rule)
        if rule is not None:
            fill_incident(inc, rule)
    return diag


def fill_incident(inc: Incident, rule: Rule) -> None:
    ctx = {"script": script_name(inc.facts), **inc.facts}
    for key, tmpl in rule.facts.items():
        inc.facts.setdefault(key, fill_text(tmpl, ctx))
    inc.guide = {key: fill_text(getattr(rule.guide, key), ctx, markdown=True) for key, _ in SECTIONS}
    inc.commands = [fill_text(c, ctx) for c in rule.commands]
    inc.references = list(rule.references)
    inc.fix = "\n\n".join(f"{title}: {inc.guide[key]}" for key, title in SECTIONS)


# The version of the JSON contract (docs/json.md): raised when a key changes meaning or goes away,
# not when one is added, so a reader can check `schema_version` and rely on the keys it knows.
JSON_SCHEMA_VERSION = 1


def _json_object(diag: Diagnosis) -> dict[str, Any]:
    return {"schema_version": JSON_SCHEMA_VERSION, **diag.to_json()}


def json_line(diag: Diagnosis) -> str:
    """One diagnosis as one line of JSON: the form of several inputs, one object per line."""
    return json.dumps(_json_object(diag), ensure_ascii=False) + "\n"


def render(diags: list[Diagnosis], fmt: str = "text", color: bool = False, width: int = 100, part: str = "all") -> str:
    """The diagnoses in one format; `width` is the text format's line width (the terminal's on a TTY).

    `part` ("head", "body", "foot"; HTML only) lets many logs stream into one document: the head once,
    each log's sections as they are ready, the summary, then the foot."""
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
        s=style,
        fact_rows=_fact_rows,
        evidence=evidence,
        split=split_highlight,
        tensor_rows=tensor_rows,
        md_html=markup.to_html,
        md_inline_html=markup.to_html_inline,
        guide_text=guide_text,
        width=max(width, 40),
        part=part,
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
