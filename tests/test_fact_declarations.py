"""Facts are declared, not discovered: each record kind says which facts it says, the context facts are
declared in kbdebug.core.facts, and `rules lint` reads only those declarations."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from test_diagnosis import RULE_FIXTURES

from kbdebug.api import diagnose_text
from kbdebug.authoring.facts import context_facts, grammar_fields, record_facts
from kbdebug.kb import load_kb
from kbdebug.normalise import iter_lines
from kbdebug.parse.needles import needles
from kbdebug.parse.regions import parse_regions
from kbdebug.scan import scan_text


def _texts() -> list[str]:
    return list(RULE_FIXTURES.values()) + [s for r in load_kb().rules for s in r.examples.positive]


def test_every_fact_a_record_says_is_declared_by_its_kind() -> None:
    declared = record_facts()
    said: set[tuple[str, str]] = set()
    for text in _texts():
        regions = scan_text(text, needles)
        assert list(iter_lines(regions))
        for rec in parse_regions(regions):
            said |= {(rec.kind, key) for key in rec.facts()}
    assert len({kind for kind, _ in said}) >= 10
    assert {(kind, key) for kind, key in said if key not in declared[kind]} == set()


def test_every_fact_an_incident_carries_is_declared_somewhere() -> None:
    kinds = record_facts()
    for text in _texts():
        for inc in diagnose_text(text).incidents:
            rule = load_kb().get(inc.rule)
            assert rule is not None
            own = set(rule.facts) | {g for m in rule.match for p in m.fields.values() for g in re.compile(p).groupindex}
            allowed = set(context_facts()) | own
            for rec in inc.records:
                allowed |= kinds[rec.kind]
            for c in inc.consequences:
                allowed |= set(c.facts)
            assert set(inc.facts) - allowed == set(), (inc.rule, text[:80])


def test_declarations_name_the_grammar_values_not_its_templates() -> None:
    fields = grammar_fields("messages")
    assert {"size_a", "size_b", "dim"} <= fields
    assert "start" not in fields and "shape" not in fields and "dims" not in fields


def test_renaming_a_local_variable_changes_no_lint_result(tmp_path: Path) -> None:
    """The lint once read other modules' source for locals named `facts`: renaming one made it report
    dozens of false problems. Now a copy of the package with those locals renamed lints the same."""
    for name in ("kbdebug", "grammars", "knowledge"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    renamed = 0
    for path in (tmp_path / "kbdebug").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        new = re.sub(r"\bfacts\b(?=\s*(?:\[|=[^=]|\.update|\.setdefault))", "found_here", text)
        new = re.sub(r"(?<![.\w])facts(?=\b[^(])", "found_here", new) if new != text else new
        if new != text:
            try:
                compile(new, str(path), "exec")
            except SyntaxError:
                continue
            path.write_text(new, encoding="utf-8")
            renamed += 1
    assert renamed >= 3
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "KBDEBUG_NO_CACHE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "kbdebug", "rules", "lint", str(tmp_path / "knowledge")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "all rule files valid" in proc.stdout + proc.stderr
