"""Hostile and huge input: every case ends in a clear one-line error or a best-effort result, never a
traceback, a hang or unbounded memory. (Speed and memory per MB are measured in benchmarks/scan.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli

ERROR = b"RuntimeError: CUDA error: an illegal memory access was encountered\n"


def explain(data: bytes, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_cli("explain", "-q", "--format", "json", *args, "-", stdin=data, env=env)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert b"Traceback (most recent call last)" not in proc.stderr, proc.stderr.decode(errors="replace")


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(256)) * 64 + ERROR,  # binary
        b"\xff\xfe\xfa not utf-8 \xc3\x28 " * 100 + ERROR,  # invalid UTF-8
        b"\x00" * 5000 + ERROR + b"\x00" * 5000,  # NUL bytes
        ERROR.replace(b"\n", b"\r\n") * 3,  # CRLF
        b"\x1b[31m" + ERROR.rstrip() + b"\x1b[0m\n",  # ANSI colours
        b"Epoch 1: 3%|#| loss=0.2\r" * 20000 + ERROR,  # \r-only progress redraws
        b"x" * 300_000 + b" " + ERROR,  # one huge line ending in the error
    ],
    ids=["binary", "invalid-utf8", "nul", "crlf", "ansi", "cr-only", "huge-line"],
)
def test_damaged_bytes_still_give_the_diagnosis(data: bytes) -> None:
    proc = explain(data)
    no_traceback(proc)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["incidents"][0]["rule"] == "illegal_memory_access"


def test_empty_and_noise_only_say_nothing_recognised() -> None:
    for data in (b"", b"step 1 loss 0.5\n" * 100):
        proc = explain(data)
        no_traceback(proc)
        assert proc.returncode == 1 and json.loads(proc.stdout)["incidents"] == []


def test_missing_file_and_directory_are_one_line_errors(tmp_path: Path) -> None:
    for target in (tmp_path / "nope.log", tmp_path):
        proc = run_cli("explain", str(target))
        no_traceback(proc)
        assert proc.returncode == 2
        assert len(proc.stderr.decode().strip().splitlines()) == 1


HOSTILE_RULE = """
id = "hostile"
title = "a rule with a catastrophic pattern"
[[match]]
kind = "exception"
fields = { message = '(a+)+$' }
[guide]
what = "never shown to anyone"
why = "never shown to anyone"
confirm = "never shown to anyone"
fix = "never shown to anyone"
"""


def test_hostile_user_rule_cannot_hang_explain_and_lint_names_it(tmp_path: Path) -> None:
    (tmp_path / "hostile.toml").write_text(HOSTILE_RULE)
    log = b"RuntimeError: " + b"a" * 40 + b"b\n"
    proc = explain(log, "--kb", str(tmp_path))  # 2**40 steps under a backtracking engine: run_cli's timeout
    no_traceback(proc)
    assert b"hostile.toml" in proc.stderr and b"repeats" in proc.stderr  # skipped, with the reason: never run
    lint = run_cli("rules", "lint", str(tmp_path))
    assert lint.returncode == 1
    line = lint.stdout.decode()
    assert "hostile.toml" in line and "match" in line and "nested repetition" in line


def test_poisoned_cache_entry_is_never_unpickled(tmp_path: Path) -> None:
    """A cache directory others can write (a shared scratch disk) is not read: a planted pickle
    would run its code as the user."""
    cache = tmp_path / "cache"
    cache.mkdir()
    marker = tmp_path / "pwned"
    env = {**os.environ, "KBDEBUG_CACHE_DIR": str(cache)}
    run_cli("explain", "-q", "--format", "json", "-", stdin=ERROR, env=env)  # fill the cache
    entries = list(cache.glob("*.pickle"))
    assert entries, "the cache was not written"
    payload = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import os, pickle, sys
        class P:
            def __reduce__(self):
                return (os.system, ("touch {marker}",))
        sys.stdout.buffer.write(pickle.dumps(P()))
    """),
        ],
        capture_output=True,
        check=True,
    ).stdout
    for entry in entries:
        entry.write_bytes(payload)
    os.chmod(cache, 0o777)  # writable by others: nothing in it is trusted
    proc = run_cli("explain", "-q", "--format", "json", "-", stdin=ERROR, env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["incidents"][0]["rule"] == "illegal_memory_access"
    assert not marker.exists()
    os.chmod(cache, 0o700)
    for entry in entries:
        os.chmod(entry, 0o666)  # a private directory but an entry others could have written
    run_cli("explain", "-q", "--format", "json", "-", stdin=ERROR, env=env)
    assert not marker.exists()


def test_fresh_cache_directory_is_private(tmp_path: Path) -> None:
    cache = tmp_path / "fresh"
    run_cli("explain", "-q", "--format", "json", "-", stdin=ERROR, env={**os.environ, "KBDEBUG_CACHE_DIR": str(cache)})
    assert cache.stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o077 == 0 for p in cache.iterdir() if p.is_file())


def test_markdown_keeps_log_text_inert() -> None:
    """Rendered the way GitHub renders an issue (CommonMark with raw HTML on), the log's HTML and backticks
    stay text: the only HTML element is kbdebug's own Facts <details>."""
    from markdown_it import MarkdownIt

    log = (
        b'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n    x()\n'
        b"ValueError: bad <details><summary>x</summary> ```y``` `a` ``b`` <img src=x onerror=alert(1)> | c\n"
    )
    out = run_cli("explain", "-q", "--format", "markdown", "-", stdin=log).stdout.decode()
    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(out)
    assert page.count("<details>") == 1 and "<img" not in page and "<summary>x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # shown, as text
    assert "| error_message | ````bad <details>" in out  # a fence longer than the message's ``` run


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX rusage")
def test_five_gigabytes_streamed_stay_in_bounded_memory() -> None:
    """5 GB without a newline (half `\\r` redraws, half one endless line), generated and piped, never stored."""
    child = Path(__file__).resolve().parent / "stream_child.py"
    out = subprocess.run([sys.executable, str(child), "measure", str(5 * 10**9)], capture_output=True, text=True, timeout=900)
    rc, rss_kb, rules = out.stdout.split()
    assert (int(rc), rules) == (0, "illegal_memory_access"), out.stderr
    assert int(rss_kb) < 150 * 1024, f"peak RSS {int(rss_kb) // 1024} MB"


def test_a_box_drawn_wide_cannot_hang_explain() -> None:
    """rich's box sides and edges are taken off lines of any width (a lazy regex took quadratic time)."""
    log = "\n".join(
        [
            "╭" + "─" * 100_000 + "x",
            "│" + " " * 100_000 + "x",
            "╰" + "─" * 100_000 + " ",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ]
    )
    proc = explain(log.encode())  # minutes for the old regex (run_cli's timeout); tests/test_patterns.py proves linear
    no_traceback(proc)
    assert b"illegal_memory_access" in proc.stdout
