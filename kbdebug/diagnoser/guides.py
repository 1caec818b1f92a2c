"""Fill each rule's guide, commands and facts with an incident's own values: the last step of a diagnosis.

A guide section is a jinja2 template over the incident's facts; a value read from the log may hold a
backtick, which would end the Markdown code span it is put in, so values pass through `_guide_value`.
Compiled templates are kept between runs (a few percent of a cold explain).
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import jinja2
import jinja2.bccache

from kbdebug._cache import code_version, private_dir
from kbdebug.diagnosis import Diagnosis, Incident
from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.kb.model import Rule


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


@cache
def _fragment_env() -> jinja2.Environment:
    # A rule's guide fragment is its own template name, so fragments share the bytecode cache too.
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda source: (source, None, lambda: True)),
        bytecode_cache=bytecode_cache(),
        undefined=jinja2.ChainableUndefined,
        autoescape=False,
        finalize=_guide_value,
    )


def _guide_value(value: Any) -> Any:
    """A value read from the log, put into a guide (Markdown, usually inside a `code span`): a backtick in
    it would end the span and let the rest render as Markdown or HTML, so it becomes a look-alike."""
    return value.replace("`", "\u02cb") if isinstance(value, str) else value


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
    inc.fix = "\n\n".join(f"{title}: {inc.guide[key]}" for key, title in SECTIONS)
