"""Adding a rule or an output format touches one place (CONTRIBUTING.md), as adding a log format does
(tests/test_format_folders.py): a copy of the package gains the new thing there, nothing else changes, and
kbdebug uses it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LOG = """\
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    batch = next(loader_iter)
flaky_loader.StaleHandleError: the dataset's file handle went stale after a remount
"""

RULE = """\
id = "stale_file_handle"
title = "A data file handle went stale (the file system was remounted)"
priority = 60
retry = "yes"
signature = ["error_type"]  # what makes two of its crashes the same

[[match]]
kind = "exception"
fields = { exc_type = 'StaleHandleError$', message = 'handle went stale' }
confidence = 0.9
"""

GUIDE = """\
## What it means

`{{ error_type }}` at `{{ innermost_user_frame }}`: a file the loader held open is gone from under it.

## Why it happens

The file system was remounted while the job ran.

## How to confirm

`mount | grep data` shows the remount time.

## How to fix

Reopen the files in each worker (`worker_init_fn`), then rerun.
"""

REPORT_CSV = """\
{#- output format, listed 5: one CSV row per incident (rule, confidence, signature, title). -#}
{% for d in diags %}{% for inc in d.incidents %}{{ d.source }},{{ inc.rule }},{{ inc.confidence }},{{ inc.signature }},"{{ inc.title }}"
{% endfor %}{% endfor %}
"""

SUMMARY_CSV = """\
{#- The crash groups of many logs, one CSV row each. -#}
{% for g in groups %}{{ g.members|length }},{{ g.rule }},{{ g.signature }}
{% endfor %}
"""


def _copy(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    for name in ("kbdebug", "grammars", "knowledge"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    before = [str(p.relative_to(tmp_path)) for p in sorted(tmp_path.rglob("*")) if p.is_file()]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "KBDEBUG_NO_CACHE": "1", "COLUMNS": "200"}
    return before, env


def _unchanged(tmp_path: Path, before: list[str]) -> list[str]:
    return [p for p in before if (tmp_path / p).read_bytes() != (ROOT / p).read_bytes()]


def _run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbdebug", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_a_new_rule_is_its_folder(tmp_path: Path) -> None:
    before, env = _copy(tmp_path)
    folder = tmp_path / "knowledge" / "stale_file_handle"
    (folder / "examples" / "positive").mkdir(parents=True)
    (folder / "examples" / "negative").mkdir(parents=True)
    (folder / "rule.toml").write_text(RULE, encoding="utf-8")
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    (folder / "examples" / "positive" / "remount.log").write_text(LOG, encoding="utf-8")
    (folder / "examples" / "negative" / "other_error.log").write_text(LOG.replace("handle went stale", "handle is fine"), encoding="utf-8")
    (tmp_path / "crash.log").write_text(LOG, encoding="utf-8")

    linted = _run(tmp_path, env, "rules", "lint", str(folder))
    assert linted.returncode == 0 and linted.stdout.strip().endswith("all rule files valid"), linted.stdout
    out = _run(tmp_path, env, "explain", "--format", "markdown", "crash.log")
    assert out.returncode == 0, out.stderr
    assert "A data file handle went stale" in out.stdout
    assert "`flaky_loader.StaleHandleError` at `train.py:12`" in out.stdout
    assert "Rerun: yes" in out.stdout
    as_json = json.loads(_run(tmp_path, env, "explain", "--format", "json", "crash.log").stdout)
    assert as_json["incidents"][0]["signature_key"] == "stale_file_handle | flaky_loader.StaleHandleError | at train.py:<module>"
    assert _unchanged(tmp_path, before) == []


def test_a_new_output_format_is_its_two_templates(tmp_path: Path) -> None:
    before, env = _copy(tmp_path)
    templates = tmp_path / "kbdebug" / "render" / "templates"
    (templates / "report.csv.j2").write_text(REPORT_CSV, encoding="utf-8")
    (templates / "summary.csv.j2").write_text(SUMMARY_CSV, encoding="utf-8")
    log = tmp_path / "crash.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.90 GiB total capacity)\n", encoding="utf-8")

    helped = _run(tmp_path, env, "explain", "--help")
    assert "text|markdown|json|html|csv" in helped.stdout.replace(" ", "")
    one = _run(tmp_path, env, "explain", "--format", "csv", str(log))
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith(f"{log},cuda_oom,") and one.stdout.count("\n") == 1
    again = tmp_path / "again.log"
    again.write_text(log.read_text(encoding="utf-8"), encoding="utf-8")
    many = _run(tmp_path, env, "explain", "--format", "csv", str(log), str(again))
    rows = many.stdout.splitlines()
    assert many.returncode == 0 and len(rows) == 3 and rows[2].startswith("2,cuda_oom,")
    assert _unchanged(tmp_path, before) == []
