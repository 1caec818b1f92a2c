"""`kbdebug run -- CMD` with small Python children: streaming, exit status, rerun, signals, save."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import run_in_pty

ROOT = Path(__file__).resolve().parent.parent
KBDEBUG = [sys.executable, "-m", "kbdebug", "run"]

ASYNC_CHILD = textwrap.dedent("""
    import os, sys
    print("CUDA_LAUNCH_BLOCKING=" + os.environ.get("CUDA_LAUNCH_BLOCKING", "unset"))
    print("TORCH_SHOW_CPP_STACKTRACES=" + os.environ.get("TORCH_SHOW_CPP_STACKTRACES", "unset"))
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
        sys.stderr.write("/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
                         "block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\\n")
        sys.stderr.write('Traceback (most recent call last):\\n  File "train.py", line 7, in <module>\\n'
                         '    loss = crit(out, y)\\nRuntimeError: CUDA error: device-side assert triggered\\n')
    else:
        sys.stderr.write('Traceback (most recent call last):\\n  File "train.py", line 9, in <module>\\n'
                         '    loss.item()\\nRuntimeError: CUDA error: device-side assert triggered\\n'
                         'CUDA kernel errors might be asynchronously reported at some other API call, so the '
                         'stacktrace below might be incorrect.\\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\\n')
    sys.exit(3)
""")


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("CUDA_LAUNCH_BLOCKING", "TORCH_SHOW_CPP_STACKTRACES")}
    e["PYTHONPATH"] = str(ROOT)
    return e


def kb_run(*args: str, timeout: float = 60, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*KBDEBUG, *args], capture_output=True, text=True, timeout=timeout, env={**env(), **(extra_env or {})}, stdin=subprocess.DEVNULL
    )


def script(tmp_path: Path, text: str, name: str = "child.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_success_passes_output_and_status(tmp_path: Path) -> None:
    child = script(tmp_path, "import sys\nprint('out line')\nprint('err line', file=sys.stderr)\n")
    res = kb_run("--", sys.executable, child)
    assert res.returncode == 0
    assert res.stdout == "out line\n"
    assert res.stderr == "err line\n"


def test_failure_keeps_exit_code_and_diagnoses(tmp_path: Path) -> None:
    child = script(tmp_path, "import torch\ntorch.nn.Conv2d(3, 8, 3)(torch.randn(1, 4, 8, 8))\n")
    res = kb_run("--", sys.executable, child)
    assert res.returncode == 1
    assert "Traceback" in res.stderr
    assert "conv_channel_mismatch" in res.stderr
    assert f"{child}:2" in res.stderr


def test_exit_code_of_any_value(tmp_path: Path) -> None:
    child = script(tmp_path, "import sys\nsys.exit(42)\n")
    res = kb_run("--", sys.executable, child)
    assert res.returncode == 42
    assert "nothing in its output matched" in res.stderr


def test_output_streams_before_the_child_ends(tmp_path: Path) -> None:
    flag = tmp_path / "go"
    child = script(
        tmp_path,
        textwrap.dedent(f"""
        import os, sys, time
        print("ready")  # no flush: kbdebug must make the child unbuffered
        deadline = time.time() + 30
        while not os.path.exists({str(flag)!r}):
            if time.time() > deadline:
                sys.exit(9)
            time.sleep(0.02)
        print("done")
    """),
    )
    proc = subprocess.Popen(
        [*KBDEBUG, "--", sys.executable, child], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first == b"ready\n"
    assert proc.poll() is None  # the child is still waiting: the line came through live
    flag.touch()
    rest, _ = proc.communicate(timeout=30)
    assert rest == b"done\n"
    assert proc.returncode == 0


def test_rerun_sets_blocking_and_reports_both(tmp_path: Path) -> None:
    child = script(tmp_path, ASYNC_CHILD)
    save = tmp_path / "saved"
    res = kb_run("--rerun", "--save", str(save), "--", sys.executable, child)
    assert res.returncode == 3
    assert res.stdout.splitlines() == [
        "CUDA_LAUNCH_BLOCKING=unset",
        "TORCH_SHOW_CPP_STACKTRACES=unset",
        "CUDA_LAUNCH_BLOCKING=1",
        "TORCH_SHOW_CPP_STACKTRACES=1",
    ]
    assert "first run: async_error_unlocalized at train.py:9" in res.stderr
    assert "with CUDA_LAUNCH_BLOCKING=1: nll_target_out_of_range at train.py:7, kernel Loss.cu:250" in res.stderr
    assert f"saved in {save / 'run-001'}" in res.stderr
    save = save / "run-001"
    summary = json.loads((save / "diagnosis.json").read_text())
    assert [r["returncode"] for r in summary["runs"]] == [3, 3]
    assert summary["runs"][1]["env"] == {"CUDA_LAUNCH_BLOCKING": "1", "TORCH_SHOW_CPP_STACKTRACES": "1"}
    assert summary["runs"][1]["diagnosis"]["incidents"][0]["rule"] == "nll_target_out_of_range"
    assert "Loss.cu:250" in (save / "run2.stderr.log").read_text()
    assert "CUDA_LAUNCH_BLOCKING=unset" in (save / "run1.log").read_text()


def test_rerun_for_an_asynchronous_illegal_memory_access(tmp_path: Path) -> None:
    child = script(
        tmp_path,
        textwrap.dedent("""
        import os, sys
        print("CUDA_LAUNCH_BLOCKING=" + os.environ.get("CUDA_LAUNCH_BLOCKING", "unset"))
        sys.stderr.write('Traceback (most recent call last):\\n  File "train.py", line 30, in <module>\\n'
                         '    print(loss.item())\\nRuntimeError: CUDA error: an illegal memory access was encountered\\n'
                         'CUDA kernel errors might be asynchronously reported at some other API call, so the '
                         'stacktrace below might be incorrect.\\n')
        sys.exit(1)
    """),
    )
    res = kb_run("--rerun", "--", sys.executable, child)
    assert res.returncode == 1
    assert res.stdout.splitlines() == ["CUDA_LAUNCH_BLOCKING=unset", "CUDA_LAUNCH_BLOCKING=1"]
    assert "first run: illegal_memory_access at train.py:30" in res.stderr
    blocking = kb_run("--rerun", "--", sys.executable, child, extra_env={"CUDA_LAUNCH_BLOCKING": "1"})
    assert blocking.stdout.splitlines() == ["CUDA_LAUNCH_BLOCKING=1"]  # already synchronous: no second run


def test_no_rerun_without_a_tty_only_suggests(tmp_path: Path) -> None:
    res = kb_run("--", sys.executable, script(tmp_path, ASYNC_CHILD))
    assert res.returncode == 3
    assert res.stdout.count("CUDA_LAUNCH_BLOCKING=") == 1
    assert "kbdebug run --rerun" in res.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_are_forwarded(tmp_path: Path, sig: signal.Signals) -> None:
    child = script(
        tmp_path,
        textwrap.dedent("""
        import signal, sys, time
        def handler(signum, frame):
            print("child got", signum, flush=True)
            sys.exit(40 + signum)
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        print("ready", flush=True)
        time.sleep(30)
        sys.exit(0)
    """),
    )
    proc = subprocess.Popen(
        [*KBDEBUG, "--", sys.executable, child], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert out == f"child got {int(sig)}\n".encode(), err
    assert proc.returncode == 40 + int(sig)


def test_child_killed_by_signal_gives_128_plus_n(tmp_path: Path) -> None:
    child = script(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert kb_run("--", sys.executable, child).returncode == 128 + 9


def test_a_grandchild_holding_the_pipe_does_not_hang_the_run(tmp_path: Path) -> None:
    """The grandchild sleeps far longer than the run may take: a run that waited for it times out."""
    pid_file = tmp_path / "grandchild.pid"
    child = script(
        tmp_path,
        "import subprocess, sys\n"
        f"p = subprocess.Popen(['sleep', '600'])\nopen({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('bye')\nsys.exit(3)\n",
    )
    try:
        res = kb_run("--", sys.executable, child, timeout=300)
        assert res.returncode == 3
        assert res.stdout == "bye\n"
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_command_not_found() -> None:
    res = kb_run("--", "no-such-command-kbdebug")
    assert res.returncode == 127
    assert res.stderr.strip() == "kbdebug: no-such-command-kbdebug: command not found"


def test_sanitizer_missing_is_one_clear_line(tmp_path: Path) -> None:
    res = kb_run(
        "--sanitizer", "memcheck", "--", sys.executable, "-c", "pass", extra_env={"KBDEBUG_COMPUTE_SANITIZER": str(tmp_path / "none")}
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "compute-sanitizer is not on PATH" in res.stderr


def test_sanitizer_report_is_diagnosed(tmp_path: Path) -> None:
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import subprocess, sys
        assert sys.argv[1:3] == ["--tool", "memcheck"], sys.argv
        print("========= COMPUTE-SANITIZER")
        rc = subprocess.call(sys.argv[3:])
        print("========= Invalid __global__ read of size 4 bytes")
        print("=========     at oob_kernel(float *, int)+0x70 in /src/oob.cu:5")
        print("=========     by thread (32,0,0) in block (0,0,0)")
        print("=========     Address 0x7f0000000080 is out of bounds")
        print("=========")
        print("========= ERROR SUMMARY: 1 error")
        sys.exit(rc)
    """)
    )
    fake.chmod(0o755)
    res = kb_run(
        "--sanitizer",
        "memcheck",
        "-f",
        "json",
        "--",
        sys.executable,
        "-c",
        "print('app ran')",
        extra_env={"KBDEBUG_COMPUTE_SANITIZER": str(fake)},
    )
    assert res.returncode == 0, res.stderr
    assert "app ran" in res.stdout
    diag = json.loads(res.stderr)
    root = diag["incidents"][0]
    assert root["rule"] == "sanitizer_memcheck"
    assert root["facts"]["kernel_file"] == "oob.cu" and root["facts"]["kernel_line"] == 5
    assert root["facts"]["access_size_bytes"] == 4 and root["facts"]["first_thread"] == [32, 0, 0]


def test_no_command_is_a_usage_error() -> None:
    res = kb_run()
    assert res.returncode == 2


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pty")
def test_asks_before_rerunning_on_a_tty(tmp_path: Path) -> None:
    child = script(tmp_path, ASYNC_CHILD)
    out, code = run_in_pty([*KBDEBUG, "--", sys.executable, child], env=env(), answer=(b"re-run once with CUDA_LAUNCH_BLOCKING=1", b"y\n"))
    assert b"re-running with CUDA_LAUNCH_BLOCKING=1" in out, out[-2000:]
    assert code == 3
    assert b"CUDA_LAUNCH_BLOCKING=1\r\n" in out
    assert b"nll_target_out_of_range at train.py:7" in out


def test_save_numbers_runs_instead_of_overwriting(tmp_path: Path) -> None:
    save = tmp_path / "saved"
    for status in (3, 4):
        res = kb_run("--save", str(save), "--", sys.executable, "-c", f"print('step'); raise SystemExit({status})")
        assert res.returncode == status
    assert sorted(p.name for p in save.iterdir()) == ["run-001", "run-002"]
    codes = [json.loads((save / d / "diagnosis.json").read_text())["runs"][0]["returncode"] for d in ("run-001", "run-002")]
    assert codes == [3, 4]


def test_unexplained_exit_is_shell_quoted() -> None:
    res = kb_run("--", sys.executable, "-c", "raise SystemExit(3)")
    assert res.returncode == 3
    assert f"`{sys.executable} -c 'raise SystemExit(3)'` exited with status 3" in res.stderr
    assert "OOM killer" not in res.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_exit_137_names_the_oom_killer() -> None:
    res = kb_run("--", sys.executable, "-c", "import os, signal; print('loading', flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    assert res.returncode == 137
    # the status itself is the evidence (a SIGKILL prints nothing): the usual sender, and how to check it
    assert "[oom_killed, confidence 0.7]" in res.stderr and "with SIGKILL (exit 137)" in res.stderr
    assert "dmesg -T" in res.stderr and "memory limit" in res.stderr and "Rerun: with less" in res.stderr


BROADCAST_WARNING = (
    "import sys\n"
    "print('/venv/lib/python3.11/site-packages/torch/nn/modules/loss.py:610: UserWarning: Using a target size "
    "(torch.Size([4])) that is different to the input size (torch.Size([4, 1])). This will likely lead to incorrect "
    "results due to broadcasting. Please ensure they have the same size.', file=sys.stderr)\n"
    "print('  return F.mse_loss(input, target, reduction=self.reduction)', file=sys.stderr)\n"
    "print('epoch 1 loss 0.91')\n"
)


def test_a_job_that_exits_0_with_a_named_cause_is_diagnosed_and_keeps_status_0(tmp_path: Path) -> None:
    """#37: torch warned that the loss broadcast its target, the job finished: the diagnosis is printed, said to
    be of a job that exited 0, and the status stays the job's."""
    res = kb_run("--", sys.executable, script(tmp_path, BROADCAST_WARNING))
    assert res.returncode == 0
    assert res.stdout == "epoch 1 loss 0.91\n"
    assert "exited with status 0, but its output names a cause (the status stays 0)" in res.stderr
    assert "[target_shape_mismatch, confidence" in res.stderr and "pred.squeeze(1)" in res.stderr


def test_a_clean_job_that_exits_0_gets_no_diagnosis(tmp_path: Path) -> None:
    res = kb_run("--", sys.executable, script(tmp_path, "print('epoch 1 loss 0.3')\nprint('UserWarning: lr is small')\n"))
    assert res.returncode == 0 and res.stderr == ""
