"""Load and validate rule files; a broken file is reported with its path, field and problem."""

from __future__ import annotations

import hashlib
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pydantic
from pydantic import ValidationError

from kbdebug._cache import cached
from kbdebug._resources import data_dir
from kbdebug._version import __version__
from kbdebug.kb.model import Rule


class RuleFileError(ValueError):
    """One line that names the file, the field and the problem."""


@dataclass
class KnowledgeBase:
    rules: list[Rule] = field(default_factory=list)
    sources: dict[str, Path] = field(default_factory=dict)

    def get(self, rule_id: str) -> Rule | None:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        return None


def load_rule(path: Path, data: bytes | None = None) -> Rule:
    try:
        text = (path.read_bytes() if data is None else data).decode("utf-8")
        parsed = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return Rule.model_validate(parsed)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(file)"
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise RuleFileError(f"{path}: field {where}: {err['msg']}{more}") from exc


def rule_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [data_dir("knowledge")]
    env = os.environ.get("KBDEBUG_KNOWLEDGE", "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += list(extra or [])
    return dirs


_MEMO: dict[str, KnowledgeBase] = {}


def load_kb(extra: list[Path] | None = None) -> KnowledgeBase:
    """Bundled rules, then KBDEBUG_KNOWLEDGE, then --kb dirs; a later rule replaces one with its id.

    Parsing and validating 30-odd TOML files is a tenth of a cold `kbdebug explain`, so the
    validated result is cached, keyed by the bytes of every rule file (an edit is seen at once).
    """
    files: list[tuple[Path, bytes]] = []
    for directory in rule_dirs(extra):
        if not directory.is_dir():
            raise RuleFileError(f"{directory}: rule directory does not exist")
        for path in sorted(directory.glob("*.toml")):
            try:
                files.append((path, path.read_bytes()))
            except OSError as exc:
                raise RuleFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(f"{__version__}|{pydantic.VERSION}|{sys.version}".encode())
    for path, data in files:
        digest.update(f"\0{path}\0{len(data)}\0".encode())
        digest.update(data)
    key = digest.hexdigest()[:24]
    kb = _MEMO.get(key)
    if kb is None:
        kb = _MEMO[key] = cached("knowledge", key, KnowledgeBase, lambda: _build(files))
    return kb


def _build(files: list[tuple[Path, bytes]]) -> KnowledgeBase:
    kb = KnowledgeBase()
    for path, data in files:
        rule = load_rule(path, data)
        old = kb.get(rule.id)
        if old is not None:
            kb.rules.remove(old)
        kb.rules.append(rule)
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


def lint(directory: Path) -> list[str]:
    """Every problem in a rule directory, one line each (empty when all files are valid)."""
    problems = []
    paths = sorted(directory.glob("*.toml")) if directory.is_dir() else []
    if not directory.is_dir():
        problems.append(f"{directory}: rule directory does not exist")
    seen: dict[str, Path] = {}
    for path in paths:
        try:
            rule = load_rule(path)
        except RuleFileError as exc:
            problems.append(str(exc))
            continue
        if rule.id in seen:
            problems.append(f"{path}: field id: {rule.id!r} already defined in {seen[rule.id]}")
        seen[rule.id] = path
    return problems
