"""capture(): fd 2 is teed into the diagnosis, written through, and always restored."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import run_in_pty

from kbdebug import capture, diagnose
from kbdebug.runtime.fdtee import _Bounded

ASSERT_LINE = (
    b"/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [189,0,0], "
    b'thread: [1,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
)


def _fd_target(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_diagnose_inside_capture_sees_fd2_lines() -> None:
    before = _fd_target(2)
    with capture(echo=False) as cap:
        os.write(2, ASSERT_LINE)
        subprocess.run([sys.executable, "-c", f"import os; os.write(2, {ASSERT_LINE!r})"], check=True)
        try:
            raise RuntimeError("CUDA error: device-side assert triggered")
        except RuntimeError as err:
            diag = diagnose(err)
        assert cap.text().count("ScatterGatherKernel.cu:365") == 2
    assert _fd_target(2) == before
    root = diag.root
    assert root.rule == "scatter_gather_index_oob"
    assert root.facts["kernel_line"] == 365
    assert root.facts["first_block"] == [189, 0, 0]
    assert root.facts["assert_lines"] == 2
    assert [c.rule for c in root.consequences] == ["async_error_unlocalized"]


def test_fd2_restored_after_keyboard_interrupt() -> None:
    before = _fd_target(2)
    with pytest.raises(KeyboardInterrupt), capture(echo=False):
        os.write(2, b"x\n")
        raise KeyboardInterrupt
    assert _fd_target(2) == before


SCRIPT = textwrap.dedent("""
    import os, sys
    from kbdebug import capture
    with capture() as cap:
        os.write(2, b"line one\\n")
        sys.stderr.write("line two\\n")
        big = b"y" * 199 + b"\\n"
        for _ in range(50_000):  # 10 MB, far beyond a pipe buffer: must not deadlock
            os.write(2, big)
        text = cap.text()
    os.write(2, b"after capture\\n")
    print(len(text) < 6_000_000, text.startswith("line one\\nline two\\n"), "elided" in text, flush=True)
""")


@pytest.mark.parametrize("target", ["file", "pipe"])
def test_writes_through_to_file_or_pipe(tmp_path, target: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    if target == "file":
        err_path = tmp_path / "err.txt"
        with open(err_path, "wb") as err:
            out = subprocess.run([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=err, timeout=60, env=env)
        stderr = err_path.read_bytes()
    else:
        res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, timeout=60, env=env)
        out, stderr = res, res.stderr
    assert out.returncode == 0, stderr[-2000:]
    assert out.stdout.split() == [b"True", b"True", b"True"]
    assert stderr.startswith(b"line one\nline two\n")
    assert stderr.count(b"y" * 199) == 50_000
    assert stderr.endswith(b"after capture\n")


def test_writes_through_to_a_tty() -> None:
    script = (
        "import os\nfrom kbdebug import capture\nwith capture() as c:\n    os.write(2, b'on the tty\\n')\n"
        "    assert 'on the tty' in c.text()\nos.write(2, b'restored\\n')\n"
    )
    chunks, code = run_in_pty([sys.executable, "-c", script])
    assert code == 0, chunks
    assert b"on the tty" in chunks and b"restored" in chunks


def test_bounded_keeps_head_and_tail() -> None:
    buf = _Bounded(head=10, tail=20)
    buf.add(b"0123456789HEAD-OVER\n")
    for i in range(100):
        buf.add(b"line %03d\n" % i)
    text = buf.getvalue()
    assert text.startswith(b"0123456789")
    assert text.endswith(b"line 099\n")
    assert b"line 050" not in text and b"elided" in text
