"""`kbdebug rules lint`: every problem of every rule file at once, as "file: field: sentence" lines.

Beyond what loading checks (TOML, the rule model, template syntax), lint looks at what a rule refers
to: the variables its templates use must be facts kbdebug can produce (or the rule's own `facts`), its
`checks` must be checks the verifier has, its `consequence_of` must name rules that exist.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from pydantic import BaseModel

from kbdebug._resources import data_dir
from kbdebug.kb.loader import read_rule, read_rule_data, rule_templates
from kbdebug.kb.model import Rule

_PACKAGE = Path(__file__).resolve().parent.parent
# The modules that put facts on an incident; facts are read off records and their frames, and the
# parsers name the values of messages. A file another version lacks is simply not read.
_FACT_SOURCES = (
    "records.py",
    "frames.py",
    "shapes.py",
    "api.py",
    "advice.py",
    "diagnosis.py",
    "kb/matcher.py",
    "verify/guard_mode.py",
    "parse/**/*.py",
)
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_ALWAYS = frozenset({"script"})  # added by the renderer for every rule


@cache
def fact_vocabulary() -> tuple[frozenset[str], tuple[re.Pattern[str], ...]]:
    """Every fact name kbdebug can produce, read from its own source, and patterns for computed names.

    Harvested rather than listed so that it has one home (the code that sets the facts): the string
    constants of those modules, each record model's fields, and f-strings such as `f"{lib}_status"`
    read as the pattern `\\w+_status`, and the grammars' rule names (a value rule is named after its fact).
    """
    names: set[str] = set(_ALWAYS)
    patterns: list[re.Pattern[str]] = []
    for glob in _FACT_SOURCES:
        for path in sorted(_PACKAGE.glob(glob)):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and _IDENT.match(node.value):
                    names.add(node.value)
                elif isinstance(node, ast.keyword) and node.arg:
                    names.add(node.arg)
                elif isinstance(node, ast.JoinedStr):
                    pattern = _fstring_pattern(node)
                    if pattern is not None:
                        patterns.append(pattern)
    from kbdebug import records
    from kbdebug.parse.grammar import GRAMMARS, parser

    for model in _subclasses(records.Record):
        names.update(model.model_fields)
    for grammar in GRAMMARS:  # a grammar names the values it reads: `size_a: INT` is the fact `size_a`
        names.update(str(rule.origin.name) for rule in parser(grammar).rules)
    return frozenset(names), tuple(patterns)


def _subclasses(cls: type[BaseModel]) -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def _fstring_pattern(node: ast.JoinedStr) -> re.Pattern[str] | None:
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if not re.fullmatch(r"[a-z0-9_]*", value.value):
                return None
            parts.append(re.escape(value.value))
        else:
            parts.append(r"\w+")
    literal = "".join(p for p in parts if p != r"\w+")
    return re.compile("^" + "".join(parts) + "$") if len(literal) >= 3 else None


def undefined_variables(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for each template variable that is neither a fact kbdebug produces nor one the rule defines."""
    env = jinja2.Environment()
    names, patterns = fact_vocabulary()
    own = data.get("facts")
    known = names | set(own if isinstance(own, dict) else ()) | set(env.globals)
    problems = []
    for where, text in rule_templates(data):
        try:
            used = jinja2.meta.find_undeclared_variables(env.parse(text))
        except jinja2.TemplateSyntaxError:
            continue  # reported by the loader
        for var in sorted(used):
            if var not in known and not any(p.match(var) for p in patterns):
                problems.append(
                    (where, f"`{var}` is not a fact kbdebug produces nor one this rule's `facts` defines; it would render empty")
                )
    return problems


def known_checks() -> frozenset[str] | None:
    """The verifier's check names (None without torch: then `checks` cannot be verified)."""
    try:
        from kbdebug.verify import RUNNERS
    except ImportError:
        return None
    return frozenset(RUNNERS)


def reference_problems(data: dict[str, Any], all_rules: list[Rule], checks: frozenset[str] | None) -> list[tuple[str, str]]:
    """(field, problem) for each check or rule id a rule file names that does not exist."""

    def names(key: str) -> list[tuple[int, str]]:
        value = data.get(key)
        return [(i, v) for i, v in enumerate(value) if isinstance(v, str)] if isinstance(value, list) else []

    problems = []
    if checks is not None:
        for i, name in names("checks"):
            if name not in checks:
                problems.append((f"checks[{i}]", f"no check named {name!r}; the checks are: {', '.join(sorted(checks))}"))
    ids = {r.id for r in all_rules}
    groups = {g for r in all_rules for g in getattr(r, "groups", [])}
    for i, ref in names("consequence_of"):
        if ref == "*":
            continue
        if ref.startswith("@"):
            if ref[1:] not in groups:
                problems.append((f"consequence_of[{i}]", f"no rule belongs to group {ref[1:]!r}"))
        elif ref == data.get("id"):
            problems.append((f"consequence_of[{i}]", "a rule cannot be a consequence of itself"))
        elif ref not in ids:
            problems.append((f"consequence_of[{i}]", f"no rule with id {ref!r} (see `kbdebug rules list`)"))
    return problems


def lint_directory(directory: Path) -> list[str]:
    """Every problem in a rule directory, one "file: field: sentence" line each (empty when all is well)."""
    if not directory.is_dir():
        return [f"{directory}: rule directory does not exist"]
    paths = sorted(directory.glob("*.toml"))
    if not paths:
        return [f"{directory}: no rule files (*.toml) in this directory"]
    loaded: list[tuple[Path, Rule | None, dict[str, Any]]] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for path in paths:
        rule, found, data = read_rule_data(path)
        problems += found
        if rule is not None:
            if rule.id in seen:
                problems.append(f"{path}: id: {rule.id!r} is already defined in {seen[rule.id]}")
            seen[rule.id] = path
        loaded.append((path, rule, data))
    bundled = [] if directory.resolve() == data_dir("knowledge").resolve() else _bundled_rules()
    everything = bundled + [rule for _, rule, _ in loaded if rule is not None]
    checks = known_checks()
    for path, _, data in loaded:
        for where, problem in undefined_variables(data) + reference_problems(data, everything, checks):
            problems.append(f"{path}: {where}: {problem}")
    problems.sort(key=lambda line: line.split(": ", 1)[0])  # grouped by file, each file's in the order found
    return problems


def _bundled_rules() -> list[Rule]:
    rules = []
    for path in sorted(data_dir("knowledge").glob("*.toml")):
        rule, _ = read_rule(path)
        if rule is not None:
            rules.append(rule)
    return rules
