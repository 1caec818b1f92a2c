"""Fill each rule's guide, commands and facts with an incident's own values: the last step of a diagnosis.

A guide section is a jinja2 template over the incident's facts; a value read from the log may hold a
backtick, which would end the Markdown code span it is put in, so such values pass through `_guide_value`
and are put back by `_fill_slots` inside a code span fenced longer than their own backtick runs.
Compiled templates are kept between runs (a few percent of a cold explain).
"""

from __future__ import annotations

import contextvars
import hashlib
import re
from functools import cache
from typing import Any

import jinja2
import jinja2.bccache
import markupsafe

from kbdebug._cache import code_version, private_dir
from kbdebug._resources import data_dir
from kbdebug.diagnosis import Diagnosis, Incident
from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import RETRY_LINES, Rule
from kbdebug.values import human_size


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


def bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs: compiling them is a few percent of a cold explain."""
    # compiled templates are code: only from a directory nobody else can write; and their bytecode depends on
    # this module's environment settings (finalize, filters), not only on the template text, hence the key
    key = hashlib.sha256(f"{jinja2.__version__}|{code_version()}".encode()).hexdigest()[:12]
    where = private_dir(f"jinja-{key}")
    return _QuietBytecodeCache(str(where)) if where is not None else None


PHRASES = "_phrases.j2"  # knowledge/_phrases.j2: the phrasing every guide shares


class _Phrases:
    """The macros of knowledge/_phrases.j2, as `phrase.NAME(...)` in any guide. What a macro returns is guide
    text (Markup), not a value from the log: the log's values it quotes were already set aside inside it."""

    def __init__(self, env: jinja2.Environment) -> None:
        self._env = env
        self._module: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._module is None:
            self._module = self._env.from_string((data_dir("knowledge") / PHRASES).read_text(encoding="utf-8")).module
        macro = getattr(self._module, name)
        return lambda *args, **kwargs: markupsafe.Markup(macro(*args, **kwargs))


def guide_environment() -> jinja2.Environment:
    """The environment every guide, command and derived fact is rendered in (its globals: `phrase`)."""
    return _fragment_env()


@cache
def _fragment_env() -> jinja2.Environment:
    # A rule's guide fragment is its own template name, so fragments share the bytecode cache too.
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda source: (source, None, lambda: True)),
        bytecode_cache=bytecode_cache(),
        undefined=jinja2.ChainableUndefined,
        autoescape=False,
        finalize=_guide_value,
    )
    env.globals["phrase"] = _Phrases(env)
    env.filters["human_size"] = human_size  # `{{ requested | human_size }}`: 745 GiB, not 800000000000 bytes
    return env


_QUOTED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("kbdebug_quoted", default=None)
_SLOT = re.compile("\x00(\\d+)\x00")
_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


def code_span(text: str) -> str:
    """`text` as a Markdown code span whose fence is longer than any backtick run inside it (CommonMark), so a
    message with backticks reads and copies as the log printed it; padded where it starts or ends with one."""
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _guide_value(value: Any) -> Any:
    """A value read from the log, put into a guide: one holding a backtick or a `<` stands in as a slot,
    filled once the guide is rendered (see `_fill_slots`), so the user's own text stays copyable as is."""
    quoted = _QUOTED.get()
    if quoted is None or not isinstance(value, str) or isinstance(value, markupsafe.Markup) or not any(c in value for c in "`<"):
        return value
    quoted.append(value)
    return f"\x00{len(quoted) - 1}\x00"


def _fill_slots(text: str, quoted: list[str], markdown: bool) -> str:
    """Put the log's values back. In Markdown a code span holding one is re-fenced (`code_span`); elsewhere
    its backticks and `<` are backslash-escaped. Facts and commands are not Markdown: values go back as they are."""
    put = lambda m: quoted[int(m.group(1))]  # noqa: E731
    if not markdown:
        return _SLOT.sub(put, text)

    def span(m: re.Match[str]) -> str:
        body = m.group(2)
        return code_span(_SLOT.sub(put, body)) if _SLOT.search(body) else m.group(0)

    out = _SPAN.sub(span, text)
    return _SLOT.sub(lambda m: re.sub(r"([`<])", r"\\\1", quoted[int(m.group(1))]), out)


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
    inc.retry = inc.facts.get("retry") if inc.facts.get("retry") in RETRY_LINES else None
    head = [RETRY_LINES[inc.retry]] if inc.retry else []
    inc.fix = "\n\n".join([*head, *(f"{title}: {inc.guide[key]}" for key, title in SECTIONS)])
