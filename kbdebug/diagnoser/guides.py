"""Fill each rule's guide, commands and facts with an incident's own values: the last step of a diagnosis.

A guide section is a jinja2 template over the incident's facts; a value read from the log may hold a
backtick, which would end the Markdown code span it is put in, so such values pass through `_guide_value`
and are put back by `_fill_slots` inside a code span fenced longer than their own backtick runs.
Compiled templates are kept between runs (a few percent of a cold explain).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Iterable
from functools import cache, lru_cache
from typing import Any

import jinja2
import markupsafe

from kbdebug import _regex_cache
from kbdebug._resources import data_dir
from kbdebug.core.facts import Facts
from kbdebug.core.templating import ShippedTemplates, bytecode_cache, code_span
from kbdebug.core.values import human_size
from kbdebug.diagnosis import Incident
from kbdebug.kb.commands import needs
from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.kb.model import RETRY_VALUES, Rule

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
        if self._module is None:  # through the loader, as a fragment: its compiled code comes from the caches
            self._module = self._env.get_template(PHRASES).module
        macro = getattr(self._module, name)
        return lambda *args, **kwargs: markupsafe.Markup(macro(*args, **kwargs))


CASES = "_cases"  # the name a guide's case texts go by in its context (kbdebug.kb.model.Guide.cases)


@jinja2.pass_context
def _case(context: Any, key: str) -> markupsafe.Markup:
    """A case page's section (`name.section`), rendered as a fragment of its own (compiled when a guide first
    reaches it) in the guide's context: the facts and what the guide has set. Guide text (Markup): its values
    were set aside as it ran."""
    text = (context.get(CASES) or {}).get(key)
    return markupsafe.Markup(context.environment.get_template(text).render(context.get_all()) if text else "")


def guide_environment() -> jinja2.Environment:
    """The environment every guide, command and derived fact is rendered in (its globals: `phrase`)."""
    return _fragment_env()


# The Python jinja2 makes of the bundled rules' fragments and of the phrases (`python -m kbdebug.render` writes it):
# a run with no cache of its own compiles that Python, not the templates (kbdebug.core.templating.ShippedTemplates).
COMPILED_GUIDES = "guides.json"  # the index: each fragment's checksum, and where its Python lies in ...
COMPILED_GUIDES_CODE = "guides.code"  # ... this file, read only for the fragments a run renders


@cache
def phrases_source() -> str:
    return (data_dir("knowledge") / PHRASES).read_text(encoding="utf-8")


@cache
def _fragment_env() -> jinja2.Environment:
    # A rule's guide fragment is its own template name, so fragments share the bytecode cache too.
    env = jinja2.Environment(
        # a fragment's name is its text; the phrases' is their file's (jinja2 quotes a name into the code it makes)
        loader=jinja2.FunctionLoader(lambda name: (phrases_source() if name == PHRASES else name, None, lambda: True)),
        undefined=jinja2.ChainableUndefined,
        autoescape=False,
        finalize=_guide_value,
        optimized=False,  # constant folding at compile time: a quarter of compiling a guide, and guides fold no constants
    )
    env.bytecode_cache = ShippedTemplates(bytecode_cache(), data_dir("knowledge") / COMPILED_GUIDES, env)
    env.globals["phrase"] = _Phrases(env)
    env.globals["case"] = _case  # a guide's case page (kbdebug.kb.layout.read_guide)
    env.filters["human_size"] = human_size  # `{{ requested | human_size }}`: 745 GiB, not 800000000000 bytes
    return env


def fragments(rules: Iterable[Rule]) -> list[str]:
    """The name of every template the guide stage compiles for these rules (a fragment's is its text: guide sections,
    derived facts, commands), and the phrases', each once: what `python -m kbdebug.render` ships compiled."""
    texts = [PHRASES]
    for rule in rules:
        texts += [getattr(rule.guide, key) for key, _ in SECTIONS] + list(rule.guide.cases.values())
        texts += [*rule.facts.values(), *rule.commands]
    return list(dict.fromkeys(t for t in texts if "{" in t))


_QUOTED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("kbdebug_quoted", default=None)
_SLOT = _regex_cache.compile("\x00(\\d+)\x00")
_SPAN = _regex_cache.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


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
    if "\x00" not in text:  # no slot: most guides quote no value that needed one
        return text
    put = lambda m: quoted[int(m.group(1))]  # noqa: E731
    if not markdown:
        return _SLOT.sub(put, text)

    def span(m: re.Match[str]) -> str:
        body = m.group(2)
        return code_span(_SLOT.sub(put, body)) if _SLOT.search(body) else m.group(0)

    out = _SPAN.sub(span, text)
    return _SLOT.sub(lambda m: re.sub(r"([`<])", r"\\\1", quoted[int(m.group(1))]), out)


def fill_text(template: str, facts: dict[str, Any], markdown: bool = False, cases: dict[str, str] | None = None) -> str:
    """A rule's template filled with the facts; `markdown`: it is a guide section (see `_fill_slots`); `cases`: its
    guide's case texts, which its sections call."""
    return _fill(template, _variables({**facts, CASES: cases or {}}), markdown)


def _variables(facts: dict[str, Any]) -> dict[str, Any]:
    """What a template reads its names from: the environment's globals, then the facts (jinja2's `render` makes
    this dict for every template it renders; an incident's templates all read the same one, made once)."""
    return {**_fragment_env().globals, **facts}


def _fill(template: str, variables: dict[str, Any], markdown: bool) -> str:
    quoted: list[str] = []
    token = _QUOTED.set(quoted)
    try:
        compiled = _template(template)
        # `Template.render` without copying `variables`: a template's `{% set %}` writes its own context's vars
        context = compiled.new_context(variables, shared=True)
        try:
            text = compiled.environment.concat(compiled.root_render_func(context))  # type: ignore[attr-defined]
        except Exception:
            compiled.environment.handle_exception()  # as `render` does: the error shown in the template's source
        return _fill_slots(text.strip(), quoted, markdown)
    except (jinja2.TemplateError, SyntaxError, TypeError, ValueError, ArithmeticError) as exc:
        # a guide that cannot render (a user's template, an odd fact value) still leaves a readable report
        return f"{template} (template error: {type(exc).__name__}: {exc})"
    finally:
        _QUOTED.reset(token)


@lru_cache(maxsize=1024)
def _template(text: str) -> jinja2.Template:
    """A template compiled once per process (jinja2's own cache checks it is up to date on every use)."""
    return _fragment_env().get_template(text)


def script_name(facts: Facts) -> str:
    """The script a rerun command names: the user's frame's file, else `train.py`."""
    frame = facts.get("innermost_user_frame") or ""
    return frame.rsplit(":", 1)[0] if frame.endswith(tuple("0123456789")) and ".py" in frame else "train.py"


def applicable(commands: list[str], facts: Facts, notebook_form: Callable[[list[tuple[str, str]]], str]) -> list[str]:
    """The commands that can help in the incident's context; in a notebook, an environment-variable command
    in the form `notebook_form` says for its variables (the guides' phrasing)."""
    have: set[str] = set()
    if facts.get("device") != "cpu":
        have.add("cuda")  # unknown device: a CUDA command may still help
    if not facts.get("launch_blocking"):
        have.add("not_blocking")
    notebook = facts.get("origin") == "notebook"
    if not notebook:
        have.add("shell")
    out: list[str] = []
    for cmd in commands:
        missing = needs(cmd) - have
        if missing == {"shell"} and notebook and (env := _ENV_PREFIX.match(cmd)):
            pairs = [(k, v) for k, v in (p.split("=", 1) for p in env.group(1).split())]
            cmd = notebook_form(pairs)
            missing = frozenset()
        if not missing and cmd.strip() and cmd not in out:
            out.append(cmd)
    return out


_ENV_PREFIX = _regex_cache.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S+\s+)+)python\s")
# Libraries that document themselves on a site of their own: a reference there helps only where the frames run
# through that library (a MONAI page for a hand-written Dice or a BCE error is noise).
_LIBRARY_SITES = (
    (_regex_cache.compile(r"//(?:[\w-]+\.)*monai\.io/"), "monai"),
    (_regex_cache.compile(r"//huggingface\.co/docs/transformers"), "transformers"),
    (_regex_cache.compile(r"//(?:[\w-]+\.)*lightning\.ai/"), "lightning"),
)


def library_of(url: str) -> str | None:
    """The package a reference documents, when it is a library's own site (see _LIBRARY_SITES)."""
    return next((lib for rx, lib in _LIBRARY_SITES if rx.search(url)), None)


def rerun_command(facts: Facts) -> str:
    """The command that reruns the job as it was launched: the caller's (`launch`: the script's own arguments,
    pytest's node id, torchrun and its options), `torchrun ... SCRIPT` when a log shows torchrun, else
    `python SCRIPT`. Guides and commands say `{{ rerun }}` wherever they rerun the job."""
    script = str(facts.get("script") or script_name(facts))
    return str(facts.get("launch") or (f"torchrun ... {script}" if facts.get("launcher") == "torchrun" else f"python {script}"))


def filled(inc: Incident, rule: Rule | None) -> Incident:
    """The guide stage: the rule's own facts, its guide and its commands filled once from the incident's facts;
    of the commands, those that can help in its context (kbdebug.diagnoser.context.applicable); the references
    to a library's own site only where the frames run through that library; what rerunning does."""
    if rule is None:
        return inc
    facts: dict[str, Any] = dict(inc.facts)
    ctx = _variables({"script": script_name(inc.facts), "rerun": rerun_command(inc.facts), **facts})
    for key, tmpl in rule.facts.items():
        if key not in facts and (value := _fill(tmpl, ctx, False)):  # one that renders empty says nothing: left out
            facts[key] = value
    sections_ctx = {**ctx, CASES: rule.guide.cases}
    guide = {key: _fill(getattr(rule.guide, key), sections_ctx, True) for key, _ in SECTIONS}
    commands = applicable([_fill(c, ctx, False) for c in rule.commands], inc.facts, notebook_env)
    libraries = (None, *inc.facts.get("libraries", ()))
    retry = facts.get("retry")
    return inc.model_copy(
        update={
            "facts": facts,
            "guide": guide,
            "commands": commands,
            "references": [url for url in rule.references if library_of(url) in libraries],
            "retry": retry if retry in RETRY_VALUES else None,
        }
    )


def notebook_env(pairs: list[tuple[str, str]]) -> str:
    """An environment-variable command in a notebook's form (knowledge/_phrases.j2's `notebook_env`)."""
    phrases: Any = guide_environment().globals["phrase"]
    return str(phrases.notebook_env(pairs))
