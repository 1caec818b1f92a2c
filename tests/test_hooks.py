"""Diagnoses where crashes happen: sys/threading excepthooks, IPython, the pytest plugin."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def py(code: str, *args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


def run(argv: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=cwd, input=stdin)


def test_excepthook_prints_diagnosis_after_traceback(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text("import kbdebug, torch\nkbdebug.install()\nemb = torch.nn.Embedding(10, 4)\nemb(torch.tensor([3, 12]))\n")
    res = run([sys.executable, str(train)], cwd=tmp_path)
    assert res.returncode == 1
    tb = res.stderr.index("IndexError: index out of range in self")
    diag = res.stderr.index("embedding_index_oob")
    assert tb < diag
    assert f"{train}:4" in res.stderr[diag:]
    # the traceback once: the guide follows it without its lines again under Evidence (#37)
    assert res.stderr.count(f'File "{train}", line 4') == 1
    assert res.stderr.count("IndexError: index out of range in self") == 1
    assert "Evidence" not in res.stderr and "Facts" not in res.stderr


def test_threading_excepthook() -> None:
    res = py("""
        import threading, kbdebug, torch
        kbdebug.install()
        def work():
            torch.randn(2, 3) @ torch.randn(4, 5)
        t = threading.Thread(target=work)
        t.start(); t.join()
        print("main continues")
    """)
    assert res.returncode == 0
    assert res.stdout == "main continues\n"
    assert "Exception in thread" in res.stderr
    assert "matmul_shape_mismatch" in res.stderr


def test_uninstall_restores_hooks() -> None:
    res = py("""
        import sys, threading, kbdebug
        before = (sys.excepthook, threading.excepthook)
        kbdebug.install(); kbdebug.install()
        kbdebug.uninstall()
        assert (sys.excepthook, threading.excepthook) == before
        print("ok")
    """)
    assert res.stdout == "ok\n", res.stderr


def test_unknown_errors_print_nothing_extra() -> None:
    res = py("""
        import kbdebug
        kbdebug.install()
        raise KeyError("plain bug")
    """)
    assert res.returncode == 1
    assert "kbdebug" not in res.stderr and "KeyError" in res.stderr


def test_ipython_extension(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    cells = textwrap.dedent("""
        %load_ext kbdebug
        import torch
        torch.nn.functional.one_hot(torch.tensor([0, 5]), num_classes=3)
        print("next cell runs")
    """)
    res = run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--no-banner",
            "--colors=NoColor",
            "--simple-prompt",
            "--HistoryManager.enabled=False",
            f"--ipython-dir={tmp_path}",
        ],
        cwd=tmp_path,
        stdin=cells,
    )
    out = res.stdout + res.stderr
    assert "Class values must be smaller than num_classes" in out
    assert "channel_onehot_mismatch" in out
    assert out.index("Class values must be") < out.index("channel_onehot_mismatch")
    assert "next cell runs" in out
    # the cell named as IPython names it, and its traceback not printed again under Evidence (#37)
    assert "at `Cell In[3], line 1`" in out or "at Cell In[3], line 1" in out
    assert "ipython-input" not in out and "Evidence" not in out


def test_ipython_extension_sees_kernel_lines_on_fd2(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    line = (
        "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [3,0,0], "
        "thread: [7,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size` failed."
    )
    cells = textwrap.dedent(f"""
        %load_ext kbdebug
        import os
        os.write(2, b'{line}' + bytes([10])); raise RuntimeError("CUDA error: device-side assert triggered")
        print("next cell runs")
    """)
    res = run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--no-banner",
            "--colors=NoColor",
            "--simple-prompt",
            "--HistoryManager.enabled=False",
            f"--ipython-dir={tmp_path}",
        ],
        cwd=tmp_path,
        stdin=cells,
    )
    out = res.stdout + res.stderr
    assert "scatter_gather_index_oob" in out, out[-3000:]
    assert "block [3, 0, 0]" in out
    assert "next cell runs" in out


TEST_FILE = """
import torch
def test_channel_mismatch():
    x = torch.randn(1, 4, 8, 8)
    torch.nn.Conv2d(3, 8, 3)(x)
def test_plain_failure():
    assert 1 == 2
"""


@pytest.mark.parametrize("flags", [["-p", "kbdebug"], ["--kbdebug"]])
def test_pytest_plugin_on(tmp_path: Path, flags: list[str]) -> None:
    (tmp_path / "test_model.py").write_text(TEST_FILE)
    res = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags, "test_model.py"], cwd=tmp_path)
    assert res.returncode == 1
    assert res.stdout.count("kbdebug diagnosis") == 1
    assert "kbdebug diagnosis (conv_channel_mismatch)" in res.stdout
    section = res.stdout.split("kbdebug diagnosis (conv_channel_mismatch)")[1].split("\n", 1)[1]
    lines = section.splitlines()[:3]
    assert lines[2].strip("_ ") in ("", "test_plain_failure") and lines[0].startswith("kbdebug: conv_channel_mismatch")
    assert lines[0].count("test_model.py:5") == 1 and "3" in lines[0] and "--kbdebug-full" in lines[1]


def test_pytest_plugin_full_guide_a_flag_away(tmp_path: Path) -> None:
    (tmp_path / "test_model.py").write_text(TEST_FILE)
    res = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kbdebug-full", "test_model.py"], cwd=tmp_path)
    assert res.returncode == 1 and res.stdout.count("kbdebug diagnosis") == 1
    assert "How to fix" in res.stdout and "[8, 3, 3, 3]" in res.stdout


def test_excepthook_compact_in_a_loop_of_threads(tmp_path: Path) -> None:
    train = tmp_path / "loop.py"
    train.write_text(
        "import threading, kbdebug, torch\nkbdebug.install(compact=True)\nemb = torch.nn.Embedding(10, 4)\n"
        "def work(i):\n    emb(torch.tensor([3, 10 + i]))\n"
        "for i in range(3):\n    t = threading.Thread(target=work, args=(i,)); t.start(); t.join()\n"
    )
    res = run([sys.executable, str(train)], cwd=tmp_path)
    lines = [line for line in res.stderr.splitlines() if line.startswith("kbdebug: ")]
    assert len(lines) == 3 and all("loop.py:5" in line for line in lines), res.stderr[-2000:]
    assert "What it means" not in res.stderr


def test_pytest_plugin_off_by_default(tmp_path: Path) -> None:
    (tmp_path / "test_model.py").write_text(TEST_FILE)
    res = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_model.py"], cwd=tmp_path)
    assert res.returncode == 1
    assert "kbdebug" not in res.stdout
