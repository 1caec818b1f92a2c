"""#30: a rerun command reruns what ran: the script's arguments, torchrun and its options, pytest's test id;
and nothing is offered that the run already had (CUDA_LAUNCH_BLOCKING=1) or cannot use (a CPU run under guard())."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from kbdebug.api import diagnose_regions, diagnose_text
from kbdebug.diagnoser.context import launch_command
from kbdebug.parse.needles import needles
from kbdebug.runtime.live import running_script
from kbdebug.scan import scan_text

ASSERT = (
    "/pytorch/aten/src/ATen/native/cuda/Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] "
    "Assertion `t >= 0 && t < n_classes` failed.\n"
)
TB = 'Traceback (most recent call last):\n  File "/job/train_ddp.py", line 88, in <module>\n    loss.item()\n'
ASYNC = TB + "RuntimeError: CUDA error: device-side assert triggered\n"
ELASTIC = (
    "[rank1]: " + ASSERT + "[rank1]: " + TB.replace("\n", "\n[rank1]: ").rstrip("[rank1]: ") + "[rank1]: RuntimeError: CUDA error: "
    "device-side assert triggered\n"
    "E0501 12:03:12.000000 100 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 7) "
    "of binary: /usr/bin/python\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    "============================================================\n"
    "train_ddp.py FAILED\n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : 2024-05-01_12:03:11\n"
    "  host      : node1\n"
    "  rank      : 1 (local_rank: 1)\n"
    "  exitcode  : 1 (pid: 7)\n"
    "  error_file: <N/A>\n"
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    "============================================================\n"
)


def test_launch_command_keeps_arguments_and_the_torchrun_launcher() -> None:
    assert launch_command(["train.py", "--lr", "0.1", "--name", "a b"], {}, []) == "python train.py --lr 0.1 --name 'a b'"
    parent = ["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc_per_node=2", "train_ddp.py", "--lr", "0.1"]
    env = {"TORCHELASTIC_RUN_ID": "none", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4"}
    assert launch_command(["train_ddp.py", "--lr", "0.1"], env, parent) == "torchrun --nproc_per_node=2 train_ddp.py --lr 0.1"
    module = ["/usr/bin/python3", "-m", "torch.distributed.run", "--standalone", "train_ddp.py"]
    assert launch_command(["train_ddp.py"], env, module) == "python -m torch.distributed.run --standalone train_ddp.py"
    assert launch_command(["train_ddp.py"], env, []) == "torchrun --nproc_per_node=2 --nnodes=2 train_ddp.py"


def test_a_log_launched_by_torchrun_gets_a_torchrun_rerun() -> None:
    inc = diagnose_text(ELASTIC).root
    assert inc is not None and inc.rule == "nll_target_out_of_range"
    assert inc.commands == ["CUDA_LAUNCH_BLOCKING=1 torchrun ... /job/train_ddp.py"]
    plain = diagnose_text(ASSERT + ASYNC).root
    assert plain is not None and plain.commands == ["CUDA_LAUNCH_BLOCKING=1 python /job/train_ddp.py"]


def test_the_scripts_arguments_are_kept(tmp_path: Path) -> None:
    """install() in a script run with arguments: the rerun command carries them."""
    script = tmp_path / "fit.py"
    script.write_text(
        "import kbdebug\nfrom kbdebug.api import diagnose_regions\nfrom kbdebug.parse.needles import needles\n"
        "from kbdebug.scan import scan_text\nfrom kbdebug.runtime.live import running_script\nimport sys\n"
        f"log = {ASSERT + ASYNC!r}\n"
        "diag = diagnose_regions(scan_text(log, needles), origin='script', facts=running_script())\n"
        "print(diag.root.commands)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(script), "--epochs", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"CUDA_LAUNCH_BLOCKING=1 python {script} --epochs 3" in proc.stdout


def test_under_pytest_the_rerun_is_the_test(request: pytest.FixtureRequest) -> None:
    facts = running_script()
    assert facts["launch"] == f"python -m pytest {request.node.nodeid}"
    diag = diagnose_regions(scan_text(ASSERT + ASYNC, needles), origin="script", facts=facts)
    assert diag.root is not None and diag.root.commands == [f"CUDA_LAUNCH_BLOCKING=1 python -m pytest {request.node.nodeid}"]
    assert "__main__.py" not in " ".join(diag.root.guide.values())


def test_with_launch_blocking_set_the_guide_says_only_that_the_line_is_the_failing_call() -> None:
    diag = diagnose_regions(scan_text(ASYNC, needles), origin="rerun")
    root = diag.root
    assert root is not None and root.rule == "async_error_unlocalized"
    text = " ".join(root.guide.values())
    assert "the line above is the failing call" in text and "only where the error was noticed" not in text
    assert not any("CUDA_LAUNCH_BLOCKING=1" in c for c in root.commands)


def test_guard_on_a_cpu_run_offers_no_cuda_launch_blocking() -> None:
    torch = pytest.importorskip("torch")
    import kbdebug
    from kbdebug.core.errors import KbdebugError

    logits, target = torch.randn(4, 3), torch.tensor([0, 1, 2, 7])
    with pytest.raises(KbdebugError) as info, kbdebug.guard():
        torch.nn.functional.cross_entropy(logits, target)
    diag = kbdebug.diagnose(info.value)
    root = diag.root
    assert root is not None and root.facts["device"] == "cpu"
    assert not any("CUDA_LAUNCH_BLOCKING" in c for c in root.commands)
    assert "CUDA_LAUNCH_BLOCKING" not in " ".join(root.guide.values())
