from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "dev"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus/dev is not present")
    return CORPUS


def run_cli(*args: str, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbdebug", *args], input=stdin, capture_output=True,
                          timeout=120, env=env, cwd=ROOT)
