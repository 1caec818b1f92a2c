"""The dev corpus from ../shared, scored with the shared evaluator (skipped when absent)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_corpus_rules_and_facts(corpus: Path) -> None:
    tool = corpus.parent.parent / "tools" / "corpus_eval.py"
    proc = subprocess.run(
        [sys.executable, str(tool), str(corpus), "--cmd", f"{sys.executable} -m kbdebug"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1200,
    )
    last = proc.stdout.strip().splitlines()[-1]
    rules, facts = (float(x) for x in re.findall(r"\(([\d.]+)%\)", last))
    assert "no-json 0" in last and rules >= 95 and facts >= 95, last
