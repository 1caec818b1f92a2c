"""What users see does not change unless a change means it to (#29: a refactor moves code, not outputs).

tests/snapshots/ holds, for every example log of every bundled rule, each incident's rule, signature, retry
verdict and confidence, and the whole Markdown rendering (guides filled with the log's values, facts,
commands, evidence) of each rule's first positive example. After a change meant to change them, rewrite them
with `python tests/snapshots` and read the diff.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "snapshots"
snap = runpy.run_path(str(HERE / "__main__.py"), run_name="snapshots")
ROOT: Path = snap["ROOT"]
STALE = "run `python tests/snapshots` if the change is meant, and review `git diff tests/snapshots/`"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # sources are named relative to the checkout, as in the snapshots


def test_every_example_keeps_its_rule_signature_retry_and_confidence() -> None:
    kept = json.loads((HERE / "verdicts.json").read_text(encoding="utf-8"))
    now = {str(p): snap["verdicts"](p) for p in snap["examples"]()}
    changed = sorted(p for p in set(kept) | set(now) if kept.get(p) != now.get(p))
    assert not changed, f"{len(changed)} examples changed ({', '.join(changed[:5])}): {STALE}"


@pytest.mark.parametrize("rule", sorted(snap["first_positives"]()))
def test_each_rule_s_guide_renders_as_kept(rule: str) -> None:
    path = snap["first_positives"]()[rule]
    assert snap["markdown"](path) == (HERE / f"{rule}.md").read_text(encoding="utf-8"), f"{rule}: {STALE}"
