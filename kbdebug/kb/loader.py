"""Load and validate rule files; a broken file is reported with its path, field and problem."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pydantic
from pydantic import ValidationError

from kbdebug._cache import cached, code_version
from kbdebug._resources import data_dir
from kbdebug.kb import shipped
from kbdebug.kb.layout import inlined, is_folder_rule, read_rule_files, rule_paths, rule_stamps
from kbdebug.kb.model import BUNDLED, Rule


class RuleFileError(ValueError):
    """One line that names the file, the field and the problem."""


@dataclass
class KnowledgeBase:
    rules: list[Rule] = field(default_factory=list)
    by_id: dict[str, Rule] = field(default_factory=dict)  # the same rules by id: each stage looks its rule up once
    sources: dict[str, Path] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # one line per broken user rule file
    replaced: list[str] = field(default_factory=list)  # one line per user rule that replaces a bundled one

    def get(self, rule_id: str) -> Rule | None:
        return self.by_id.get(rule_id)

    def add(self, rule: Rule) -> Rule | None:
        """Add a rule, replacing the one of its id (returned)."""
        old = self.by_id.pop(rule.id, None)
        if old is not None:
            self.rules.remove(old)
        self.rules.append(rule)
        self.by_id[rule.id] = rule
        return old

    def tagged(self, rule_id: str, tag: str) -> bool:
        """Whether the rule says it is of a kind (`fallback`, `async`, `collective`): code asks, never names ids."""
        rule = self.get(rule_id)
        return rule is not None and tag in rule.tags


def load_rule(path: Path, data: bytes | None = None, bundled: bool = False) -> Rule:
    """The validated rule in `path`, or a RuleFileError naming its first problem (lint lists them all)."""
    rule, problems, _ = read_rule_data(path, data, bundled)
    if rule is None or problems:
        more = f" (and {len(problems) - 1} more; `kbdebug rules lint {path.parent}` lists them)" if len(problems) > 1 else ""
        raise RuleFileError(f"{problems[0]}{more}")
    return rule


def read_rule(path: Path, data: bytes | None = None) -> tuple[Rule | None, list[str]]:
    """The rule (None when it cannot be built) and every problem found, one "file: field: sentence" line each."""
    rule, problems, _ = read_rule_data(path, data)
    return rule, problems


def bundled_rules() -> list[Rule]:
    """The package's own rules, each read from its files alone (no KBDEBUG_KNOWLEDGE or --kb folder); a rule that
    does not read is left out (`kbdebug rules lint` lists its problems): what the authoring tools compare against."""
    rules = []
    for path in rule_paths(data_dir("knowledge")):
        rule, _ = read_rule(path)
        if rule is not None:
            rules.append(rule)
    return rules


def read_rule_data(path: Path, data: bytes | None = None, bundled: bool = False) -> tuple[Rule | None, list[str], dict[str, Any]]:
    """As read_rule, plus the file's parsed TOML, so that lint can look further into a rule the model rejects.

    Template syntax is checked here, not only by lint, so that a broken guide is never rendered with
    jinja2's error in place of the user's text. `bundled=True` leaves that and the compiling of its patterns
    to the tests (bundled rules: every template is compiled and rendered by tests/test_rule_examples.py, every
    pattern compiled and timed by tests/test_patterns.py, before a release); what the model checks besides (the
    record kinds, fields, facts) is checked all the same.
    """
    try:
        raw = path.read_bytes() if data is None else data
    except OSError as exc:
        return None, [f"{path}: cannot read: {exc.strerror or exc}"], {}
    shipped_data = shipped.read(path, raw) if bundled and is_folder_rule(path) else None
    if shipped_data is not None:  # a bundled rule folder as its files were read before it was shipped
        parsed = shipped_data
    else:
        parsed, problem = read_rule_files(path, raw)
        if problem is not None:
            return None, [problem], parsed
    rule = None
    try:
        rule = Rule.model_validate(parsed, context={BUNDLED: bundled})
        if is_folder_rule(path):
            rule.read_examples_from(path.parent)
        problems = []
    except ValidationError as exc:
        problems = [f"{path}: {line}" for line in validation_lines(exc)]
    if not bundled:
        problems += [f"{path}: {where}: {problem}" for where, problem in template_syntax_errors(parsed)]
    return (rule if not problems else None), problems, parsed


def validation_lines(exc: ValidationError) -> list[str]:
    """Each pydantic error as "field: sentence", whatever the validator: the field path reads like the TOML."""
    lines = []
    for err in exc.errors():
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(file)"
        lines.append(f"{where}: {_sentence(err)}")
    return lines


def _sentence(err: Any) -> str:
    """A plain sentence for one pydantic error: a missing or unknown field said so, else pydantic's message and the value."""
    kind, msg = err["type"], str(err["msg"])
    if kind == "missing":
        return "this field is required but missing"
    if kind == "extra_forbidden":
        return "unknown field (a typo? it is not part of the rule format)"
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = msg[:1].lower() + msg[1:] if msg[:2] != msg[:2].upper() else msg
    value = err.get("input")
    if isinstance(value, (str, int, float, bool)) and kind not in ("value_error", "assertion_error"):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return f"{msg}; got {shown}"
    return msg


def rule_templates(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, template) for every jinja2 template in a rule file's data: guide sections, commands, derived facts.

    Read from the parsed file rather than the model so that a rule the model rejects is still checked.
    """

    guide = data.get("guide")
    cases = _strings(guide.get("cases")) if isinstance(guide, dict) else {}
    out = [(f"guide.{key}", inlined(text, cases)) for key, text in _strings(guide).items()]
    commands = data.get("commands")
    out += [(f"commands[{i}]", text) for i, text in enumerate(commands if isinstance(commands, list) else []) if isinstance(text, str)]
    out += [(f"facts.{key}", text) for key, text in _strings(data.get("facts")).items()]
    return out


def rule_fragments(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, template) for every template the guides compile of a rule: as `rule_templates`, but a guide section as
    it is, and each case text it calls (`case(...)`: kbdebug.kb.layout.read_guide) as a fragment of its own."""
    guide = data.get("guide")
    cases = _strings(guide.get("cases")) if isinstance(guide, dict) else {}
    out = rule_templates({**data, "guide": {}}) + [(f"guide.{k}", v) for k, v in _strings(guide).items()]
    return out + [(f"guide.cases.{key}", text) for key, text in cases.items()]


def _strings(value: Any) -> dict[str, str]:
    """The string values of a table of a rule file, whatever a broken file holds there."""
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def template_syntax_errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for each template jinja2's own parser rejects."""
    env = jinja2.Environment()
    problems = []
    for where, text in rule_templates(data):
        try:
            env.parse(text)
        except jinja2.TemplateSyntaxError as exc:
            problems.append((where, f"template does not compile (line {exc.lineno}): {exc.message}"))
    return problems


def rule_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [data_dir("knowledge")]
    env = os.environ.get("KBDEBUG_KNOWLEDGE", "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += list(extra or [])
    return dirs


_MEMO: dict[tuple[tuple[str, int, int], ...], KnowledgeBase] = {}


def load_kb(extra: list[Path] | None = None) -> KnowledgeBase:
    """Bundled rules, then KBDEBUG_KNOWLEDGE, then --kb dirs; a later rule replaces one with its id.

    Parsing and validating 50-odd TOML files is a tenth of a cold `kbdebug explain`, so the validated
    result is cached, keyed by the size and time of change of every file a rule is read from (one stat
    each: an edit is seen at once; reading them all for the key cost more than unpickling the result).
    """
    directories = rule_dirs(extra)
    stamps: list[tuple[str, int, int]] = []
    bundled = data_dir("knowledge")
    for directory in directories:
        try:
            stamps += rule_stamps(directory, watch=directory == bundled)
        except OSError:
            raise RuleFileError(f"{directory}: rule directory does not exist") from None
    memo_key = tuple(stamps)  # compared in this process; hashed only for the cache on disk
    kb = _MEMO.get(memo_key)
    if kb is None:
        digest = hashlib.sha256(f"{code_version()}|{pydantic.VERSION}".encode())
        for name, size, mtime in stamps:  # a folder's guide is part of the rule
            digest.update(f"\0{name}\0{size}\0{mtime}".encode())
        paths = [path for directory in directories for path in rule_paths(directory)]

        def build() -> KnowledgeBase:
            return _build(_read(paths), bundled)

        kb = _MEMO[memo_key] = cached("knowledge", digest.hexdigest()[:24], KnowledgeBase, build, _settled)
        for line in kb.skipped:  # once per process and set of files, not once per diagnosed log
            print(f"kbdebug: warning: rule skipped: {line}", file=sys.stderr)
        for line in kb.replaced:  # allowed (a user's own wording of a cause), never silent
            print(f"kbdebug: note: {line}", file=sys.stderr)
    return kb


def _settled(kb: KnowledgeBase) -> bytes:
    """The knowledge base as kept in the cache: with what its rules read off their patterns when first used
    read now, so that a run that loads it never reads them (kbdebug.kb.model.Rule.settle)."""
    for rule in kb.rules:
        rule.settle()
    return pickle.dumps(kb, protocol=pickle.HIGHEST_PROTOCOL)


def _read(paths: list[Path]) -> list[tuple[Path, bytes]]:
    files = []
    for path in paths:
        try:
            files.append((path, path.read_bytes()))
        except OSError as exc:
            raise RuleFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return files


def _build(files: list[tuple[Path, bytes]], bundled: Path) -> KnowledgeBase:
    """A broken bundled rule is kbdebug's bug (an error); a broken user rule is skipped so the rest still diagnose."""
    kb = KnowledgeBase()
    for path, data in files:
        try:
            # parsing ~200 templates and compiling ~500 patterns: a third of loading the rules with no cache
            rule = load_rule(path, data, bundled=bundled in path.parents)
        except RuleFileError as exc:
            if bundled in path.parents:
                raise
            kb.skipped.append(str(exc))
            continue
        old = kb.add(rule)
        if old is not None:
            if bundled in kb.sources.get(rule.id, path).parents and bundled not in path.parents:
                kb.replaced.append(f"{path} replaces the bundled rule {rule.id!r}")
        kb.sources[rule.id] = path
    _expand_groups(kb)
    return kb


def _expand_groups(kb: KnowledgeBase) -> None:
    """`consequence_of = ["@device_fault"]` means every rule that declares `groups = ["device_fault"]`:
    a cause's membership is written once, in the cause's own file."""
    members: dict[str, list[str]] = {}
    for rule in kb.rules:
        for group in rule.groups:
            members.setdefault(group, []).append(rule.id)
    for rule in kb.rules:
        if any(c.startswith("@") for c in rule.consequence_of):
            expanded: list[str] = []
            for cause in rule.consequence_of:
                for rid in members.get(cause[1:], []) if cause.startswith("@") else [cause]:
                    if rid not in expanded and rid != rule.id:
                        expanded.append(rid)
            rule.consequence_of = expanded
