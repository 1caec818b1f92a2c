"""`kbdebug rules lint`: every problem of every rule file at once, as "file: field: sentence" lines.

Beyond what loading checks (TOML, the rule model, template syntax), lint looks at what a rule refers
to: the variables its templates use must be facts the rule's matches can produce (kbdebug.authoring.facts)
or its own `facts`, its `checks` must be checks the verifier has, its `consequence_of` must name rules
that exist, and its examples must be diagnosed as it says (kbdebug.authoring.examples).
"""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from kbdebug._resources import data_dir
from kbdebug.authoring.examples import check_examples
from kbdebug.authoring.facts import rule_vocabulary
from kbdebug.kb.layout import rule_paths
from kbdebug.kb.loader import RuleFileError, bundled_rules, read_rule_data, rule_fragments, rule_templates
from kbdebug.kb.model import Rule


def folded_kinds(data: dict[str, Any], all_rules: list[Rule]) -> set[str]:
    """The record kinds of the rules whose incidents fold into this rule's (their `consequence_of` names it,
    one of its groups, or `*`; or their evidence is weak, a bare exit status, which folds under any named cause
    but the catch-all): the matcher adds their records' facts to its incident."""
    rule_id = data.get("id")
    groups = {f"@{g}" for g in _strings(data, "groups")}
    fallback = "fallback" in _strings(data, "tags")
    catch_all = fallback or "*" in _strings(data, "consequence_of")  # (a `*` rule folds into none of these)
    kinds: set[str] = set()
    for other in all_rules:
        if other.id == rule_id:
            continue
        refs = set(other.consequence_of)
        if rule_id in refs or refs & groups or ("*" in refs and not catch_all):
            kinds |= {m.kind for m in other.match}
        elif not fallback:
            kinds |= {m.kind for m in other.match if m.weak}
    return kinds


def _strings(data: dict[str, Any], key: str) -> list[str]:
    """A list-of-strings field of a rule file as written, whatever a broken file holds there."""
    value = data.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def undefined_variables(data: dict[str, Any], all_rules: list[Rule]) -> list[tuple[str, str]]:
    """(field, problem) for each template variable that none of the rule's matches can produce (see
    kbdebug.authoring.facts) and that the rule does not define itself. A guarded use (`{% if x %}`) counts:
    a fact the rule can never have makes the guarded text dead."""
    from kbdebug.diagnoser.guides import guide_environment

    env = guide_environment()  # its globals (`phrase`, knowledge/_phrases.j2) are no facts
    vocab = rule_vocabulary(data, folded_kinds(data, all_rules))
    matches = data.get("match")
    kinds = sorted({str(m.get("kind")) for m in matches if isinstance(m, dict)} if isinstance(matches, list) else set())
    rule_id = data.get("id", "?")
    problems = []
    for where, text in rule_templates(data):
        try:
            used = jinja2.meta.find_undeclared_variables(env.parse(text))
        except jinja2.TemplateSyntaxError:
            continue  # reported by the loader
        for var in sorted(used):
            if var not in vocab and var not in env.globals:
                source = f"its matches ({', '.join(kinds)})" if kinds else "its indicators"
                sentence = f"rule {rule_id!r} uses `{var}`, a fact {source} never produce and its `facts` do not define"
                problems.append((where, sentence + "; it would render empty"))
    return problems


def generated_code_errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for each template that jinja2 parses but whose generated Python does not compile as the
    guides compile it (kbdebug.diagnoser.guides: a fragment's text is its template name). jinja2 quotes the name
    into the code of an inline `if` with no `else` (`{{ "r" if x }}`), which breaks when the text holds a double
    quote: the loader's parse check passes it, and the guide would render as its own source with an error."""
    from kbdebug.diagnoser.guides import guide_environment

    env = guide_environment()
    problems = []
    for where, text in rule_fragments(data):
        try:
            env.compile(text, text)
        except jinja2.TemplateSyntaxError:
            continue  # reported by the loader
        except SyntaxError as exc:
            problems.append((where, f"template does not compile to Python (line {exc.lineno}): {exc.msg}; write each `if` with its `else`"))
    return problems


def known_checks() -> frozenset[str] | None:
    """The verifier's check names: the keys of its `RUNNERS` table, read from the source rather than imported.
    Importing the verifier imports torch (1-3 s, and a NumPy warning where numpy is missing) only to list
    names, and lint must work without torch. None when the table cannot be read (then `checks` go unchecked)."""
    source = Path(__file__).resolve().parent.parent / "verify" / "catalog.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        target: ast.expr
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "RUNNERS" and isinstance(value, ast.Dict):
            return frozenset(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return None


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
    vocab = rule_vocabulary(data, folded_kinds(data, all_rules))
    for i, name in names("signature"):
        if name not in vocab:
            problems.append((f"signature[{i}]", f"{name!r} is no fact this rule's matches produce or its `facts` define"))
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


def lint_directory(directory: Path, warnings: list[str] | None = None) -> list[str]:
    """Every problem in a rule directory (or one rule file), one "file: field: sentence" line each (empty when
    all is well). `warnings` receives what is allowed but worth saying: a rule that replaces a bundled one."""
    if directory.is_file():
        paths, directory = [directory], directory.parent
    elif not directory.is_dir():
        return [f"{directory}: no such rule file or directory"]
    else:
        paths = rule_paths(directory)
    if not paths:
        return [f"{directory}: no rules in this directory (a folder <id>/rule.toml, or a file <id>.toml)"]
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
    home = data_dir("knowledge").resolve()
    own = home in (directory.resolve(), *directory.resolve().parents)  # a bundled rule's folder lints as bundled
    bundled = [] if directory.resolve() == home else bundled_rules()
    bundled_ids = {r.id for r in bundled}
    for path, rule, _ in loaded:
        if rule is not None and rule.id in bundled_ids and warnings is not None and not own:
            shown = f"`kbdebug rules show {rule.id}`"
            warnings.append(f"{path}: id: {rule.id!r} replaces the bundled rule of that id ({shown}); rename it to add a rule beside it")
    everything = [r for r in bundled if r.id not in seen] + [rule for _, rule, _ in loaded if rule is not None]
    checks = known_checks()
    kb_dirs = None if own else [directory]  # a user rule's examples run in the knowledge base it joins
    examples_run = True
    for path, rule, data in loaded:
        said = undefined_variables(data, everything) + generated_code_errors(data) + reference_problems(data, everything, checks)
        for where, problem in said:
            problems.append(f"{path}: {where}: {problem}")
        if rule is not None and examples_run:
            try:
                with contextlib.redirect_stderr(io.StringIO()):  # the loader's "rule skipped" lines: this list has them already
                    problems += [f"{path}: examples: {problem}" for problem in check_examples(rule, kb_dirs)]
            except RuleFileError:  # a broken bundled rule: no knowledge base loads to run any example in (it is listed above)
                examples_run = False
                problems.append(f"{directory}: examples: not run: no knowledge base loads while a rule file is broken (see its lines)")
    problems.sort(key=lambda line: line.split(": ", 1)[0])  # grouped by file, each file's in the order found
    return problems
