"""Commands are offered only where they can help: CPU vs CUDA, script vs notebook vs `kbdebug run`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kbdebug.api import diagnose_regions, diagnose_text
from kbdebug.diagnoser.context import libraries
from kbdebug.diagnoser.guides import applicable, notebook_env
from kbdebug.parse.needles import needles
from kbdebug.scan import scan_text

TB = 'Traceback (most recent call last):\n  File "/work/proj/fit.py", line 57, in <module>\n    loss = crit(out, y)\n'
ASYNC = TB + (
    "RuntimeError: CUDA error: device-side assert triggered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
)
NOTEBOOK = (
    "Traceback (most recent call last):\n  Cell In[7], line 3\n    loss = crit(out, y)\n"
    "RuntimeError: CUDA error: device-side assert triggered\n"
)
CPU_NLL = TB + "IndexError: Target 9 is out of bounds.\n"


def test_cuda_error_from_a_script_gets_blocking_rerun_and_sanitizer_for_that_script() -> None:
    inc = diagnose_text(ASYNC).root
    assert inc is not None and inc.facts["device"] == "cuda" and inc.facts["origin"] == "log"
    assert inc.commands == [
        "CUDA_LAUNCH_BLOCKING=1 TORCH_SHOW_CPP_STACKTRACES=1 python /work/proj/fit.py",
        "kbdebug run --rerun -- python /work/proj/fit.py",
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python /work/proj/fit.py",
    ]


def test_cpu_error_gets_no_cuda_command() -> None:
    inc = diagnose_text(CPU_NLL).root
    assert inc is not None and inc.rule == "nll_target_out_of_range"
    assert inc.facts["device"] == "cpu" and inc.commands == []


def test_notebook_gets_the_environment_in_a_cell_not_a_script() -> None:
    inc = diagnose_text(NOTEBOOK).root
    assert inc is not None and inc.facts["origin"] == "notebook"
    assert inc.commands == [
        'import os; os.environ.update(CUDA_LAUNCH_BLOCKING="1", TORCH_SHOW_CPP_STACKTRACES="1")'
        "  # first cell, after restarting the kernel; then rerun the cells"
    ]


def test_after_kbdebug_run_rerun_no_second_blocking_rerun() -> None:
    diag = diagnose_regions(scan_text(ASYNC, needles), origin="rerun", facts={"script": "fit.py --epochs 3"})
    inc = diag.root
    assert inc is not None and inc.facts["launch_blocking"] is True
    assert inc.commands == ["PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python fit.py --epochs 3"]


def test_kbdebug_run_names_the_command_it_ran() -> None:
    inc = diagnose_regions(scan_text(ASYNC, needles), origin="run", facts={"script": "fit.py --epochs 3"}).root
    assert inc is not None and inc.commands[1] == "kbdebug run --rerun -- python fit.py --epochs 3"


def test_blocking_already_set_in_a_live_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    assert applicable(
        ["CUDA_LAUNCH_BLOCKING=1 python a.py", "compute-sanitizer python a.py"],
        {"device": "cuda", "origin": "script", "launch_blocking": True},
        notebook_env,
    ) == ["compute-sanitizer python a.py"]


def test_unknown_device_keeps_cuda_commands_and_duplicates_go() -> None:
    cmds = ["CUDA_LAUNCH_BLOCKING=1 python a.py", "CUDA_LAUNCH_BLOCKING=1 python a.py", "nvidia-smi"]
    assert applicable(cmds, {"origin": "log"}, notebook_env) == ["CUDA_LAUNCH_BLOCKING=1 python a.py", "nvidia-smi"]
    assert applicable(cmds, {"origin": "log", "device": "cpu"}, notebook_env) == ["nvidia-smi"]


def test_live_cpu_exception_is_cpu_and_from_a_script() -> None:
    torch = pytest.importorskip("torch")
    from kbdebug import diagnose

    try:
        torch.nn.functional.cross_entropy(torch.randn(3, 4), torch.tensor([0, 4, 1]))
    except IndexError as exc:
        inc = diagnose(exc).root
    assert inc is not None and inc.facts["device"] == "cpu" and inc.facts["origin"] == "script"
    assert inc.commands == []


def test_libraries_come_from_the_frames() -> None:
    files = [
        "/opt/venv/lib/python3.11/site-packages/monai/losses/dice.py",
        "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
        "/work/train.py",
        "/usr/lib/python3/dist-packages/monai/utils/x.py",
    ]
    assert libraries(files) == ["monai", "torch"]
    log = (
        'Traceback (most recent call last):\n  File "/work/train.py", line 5, in <module>\n    loss = dice(p, y)\n'
        '  File "/opt/venv/lib/python3.11/site-packages/monai/losses/dice.py", line 170, in forward\n'
        '    raise AssertionError(f"ground truth has different shape ({target.shape}) from input ({input.shape})")\n'
        "AssertionError: ground truth has different shape (torch.Size([2, 1, 8, 8])) from input (torch.Size([2, 3, 8, 8]))\n"
    )
    assert diagnose_text(log).root.facts["libraries"] == ["monai"]
    assert "libraries" not in diagnose_text(CPU_NLL).root.facts


def test_kbdebug_run_rerun_end_to_end(tmp_path: Path) -> None:
    """The first run suggests the blocking rerun of the command it ran; the rerun does not suggest it again."""
    from test_run import ASYNC_CHILD, kb_run

    child = tmp_path / "fit.py"
    child.write_text(ASYNC_CHILD)
    res = kb_run("--rerun", "--save", str(tmp_path / "saved"), "--", sys.executable, str(child))
    assert res.returncode == 3
    first, second = (
        r["diagnosis"]["incidents"][0] for r in json.loads((tmp_path / "saved" / "run-001" / "diagnosis.json").read_text())["runs"]
    )
    assert first["facts"]["origin"] == "run" and f"kbdebug run --rerun -- python {child}" in first["commands"]
    assert second["facts"]["origin"] == "rerun" and second["facts"]["launch_blocking"] is True
    assert second["commands"] == []


def test_a_shape_error_says_nothing_about_the_device() -> None:
    inc = diagnose_text(TB + "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x300 and 200x4)\n").root
    assert inc is not None and inc.rule == "matmul_shape_mismatch" and "device" not in inc.facts


def test_live_error_from_a_jupyter_cell_is_a_notebook() -> None:
    from kbdebug import diagnose

    cell = compile('raise RuntimeError("CUDA error: device-side assert triggered")\n', "/tmp/ipykernel_4242/77.py", "exec")
    try:
        exec(cell, {})
    except RuntimeError as exc:
        inc = diagnose(exc).root
    assert inc is not None and inc.facts["origin"] == "notebook"
    assert all("python" not in c.split("#")[0] for c in inc.commands) and inc.commands[0].startswith("import os; os.environ.update(")
