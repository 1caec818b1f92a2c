from __future__ import annotations

import json
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
    return subprocess.run([sys.executable, "-m", "kbdebug", *args], input=stdin, capture_output=True, timeout=120, env=env, cwd=ROOT)


def explain_in_fresh_process(*args: str, entry: str = "kbdebug.cli.app") -> tuple[int | str | None, set[str]]:
    """`kbdebug explain ARGS` run through `entry`'s `main` in a new interpreter: its exit status and the modules
    it imported (what start-up tests look for, or must not find)."""
    code = (
        f"import json, sys; from {entry} import main; sys.argv = ['kbdebug', 'explain', *{list(args)!r}]\n"
        "status = 0\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    status = exc.code\n"
        "print(json.dumps([status, sorted(sys.modules)]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    status, modules = json.loads(proc.stdout.splitlines()[-1])
    return status, set(modules)


def run_in_pty(
    argv: list[str], env: dict | None = None, answer: tuple[bytes, bytes] | None = None, timeout: float = 60
) -> tuple[bytes, int]:
    """Run argv with a pseudo-terminal as stdin/stdout/stderr; optionally type answer[1] once
    answer[0] has appeared. Returns everything the terminal showed and the exit code."""
    import os
    import select
    import time

    pty = pytest.importorskip("pty")
    pid, fd = pty.fork()
    if pid == 0:  # child
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.execv(argv[0], argv)
    out, answered = b"", answer is None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 1.0)[0]:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
        if not answered and answer[0] in out:
            os.write(fd, answer[1])
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return out, os.waitstatus_to_exitcode(status)
