"""No wrong specific cause (rule-ids.md, "Boundaries against a wrong specific cause"): a plain Python error of an ML
script is `other` (its guide built from the error itself), and a successful run's output (warnings, tqdm, NCCL's
own warnings, `error` in metric names) is no failure at all. A wrong specific cause sends the user to fix the
wrong thing; these logs are written from the wordings Python, numpy, pandas, NCCL and cuDNN print."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbdebug import diagnose_text

CASES = Path(__file__).parent / "cases"
PLAIN = sorted((CASES / "plain").glob("*.log"))
SUCCESS = sorted((CASES / "success").glob("*.log"))
# a KeyError on a dict read from a config file has its own rule (rule-ids.md: config_error) where it is installed
ALSO_RIGHT = {"keyerror_cfg.log": {"config_error"}}


def test_the_sets_are_there() -> None:
    assert len(PLAIN) >= 25 and len(SUCCESS) >= 10


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.stem)
def test_a_plain_python_error_is_other_and_nothing_else(path: Path) -> None:
    diag = diagnose_text(path.read_text(encoding="utf-8"), source=path.name)
    rules = [inc.rule for inc in diag.incidents]
    assert rules and rules[0] in {"other"} | ALSO_RIGHT.get(path.name, set()), rules
    assert len(rules) == 1, rules  # a worker's re-raised error and its inner one are one error


@pytest.mark.parametrize("path", SUCCESS, ids=lambda p: p.stem)
def test_a_successful_run_is_no_failure(path: Path) -> None:
    diag = diagnose_text(path.read_text(encoding="utf-8"), source=path.name)
    assert [inc.rule for inc in diag.incidents] == []


def test_an_exception_python_ignored_is_no_failure_and_never_hides_the_one_that_was() -> None:
    """`Exception ignored in: <...__del__>` and its traceback (Python's unraisable hook): the program went on. Alone
    it is no failure; before a real crash, the crash is the root and the ignored one is not evidence of it."""
    ignored = (SUCCESS[0].parent / "dataloader_del_exception_ignored.log").read_text(encoding="utf-8")
    assert diagnose_text(ignored).incidents == []
    crash = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    img = sample["image"]\nKeyError: \'image\'\n'
    diag = diagnose_text(ignored + crash)
    assert [inc.rule for inc in diag.incidents] == ["other"]
    assert diag.incidents[0].facts["error_message"] == "'image'"
    # an ignored CUDA error is still a CUDA error: the device failed, whatever swallowed the exception
    cuda = ignored.replace(
        "AssertionError: can only test a child process", "RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert [inc.rule for inc in diagnose_text(cuda).incidents] == ["illegal_memory_access"]


def test_a_c10_warning_is_no_failure_but_a_cuda_error_it_reports_is_read() -> None:
    """PyTorch's C++ warnings (`[W<time> file.cpp:N] Warning: ...`) say the program went on: a phrase in one
    (`ProcessGroupNCCL`) names no cause. A CUDA error one reports during teardown is still that error."""
    reminder = "[W1105 10:11:12.123456789 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.\n"
    assert diagnose_text(reminder).incidents == []
    teardown = "[W1105 10:11:12.123456789 CUDAGuardImpl.h:119] Warning: CUDA warning: an illegal memory access was encountered (function destroyEvent)\n"
    root = diagnose_text(teardown).root
    assert root is not None and root.rule == "illegal_memory_access"


@pytest.mark.parametrize(
    "line",
    [
        "Tip: if you see Segmentation fault, set num_workers=0",
        "trainer.py:88: UserWarning: To avoid CUDA out of memory, enable gradient checkpointing",
        "[train] note: a batch size above 64 may cause out of memory errors on 16 GB cards",
        "UserWarning: Using fork after CUDA init can lead to a deadlock; a segmentation fault may occur when workers touch CUDA",
    ],
)
def test_a_cause_named_as_advice_or_a_forecast_is_no_failure(line: str) -> None:
    """A phrase a cause's indicators hold, said in a tip, a purpose (`to avoid`) or a forecast (`may cause`), reports
    nothing: alone, such a line was inferred to be that cause."""
    assert diagnose_text(line + "\nEpoch 1/3: loss=0.512\n").incidents == []


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        # a causal report is no forecast
        (
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)",
            "dataloader_shm_exhausted",
        ),
        # the purpose clause is hedged, not the sentence it leads
        (
            "[Rank 0] Some NCCL operations have failed or timed out. To avoid data inconsistency, we are taking the entire process down.",
            "nccl_error",
        ),
        ("When I run it on 2 GPUs it crashes with Segmentation fault (core dumped) right after the first batch", "native_crash"),
        ("train.py: error: CUDA out of memory while loading the model, which can happen if the batch is large", "cuda_oom"),
    ],
)
def test_a_cause_reported_beside_advice_still_speaks(line: str, rule: str) -> None:
    root = diagnose_text(line + "\n").root
    assert root is not None and root.rule == rule


@pytest.mark.parametrize(
    ("warning", "rule"),
    [
        (
            "/usr/lib/python3/site-packages/torch/nn/modules/loss.py:535: UserWarning: Using a target size (torch.Size([16])) "
            "that is different to the input size (torch.Size([16, 1])). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.\n  return F.mse_loss(input, target, reduction=self.reduction)\n",
            "target_shape_mismatch",
        ),
        (
            "/usr/lib/python3/site-packages/torch/cuda/__init__.py:124: UserWarning: CUDA initialization: The NVIDIA driver on "
            "your system is too old (found version 11000). (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n",
            "driver_error",
        ),
    ],
)
def test_a_warning_that_says_the_run_goes_wrong_names_its_cause_with_no_failure_in_the_log(warning: str, rule: str) -> None:
    """A run that only warned names no cause (the sets above), except where the warning says its results are wrong: a
    loss that will broadcast its target, CUDA that could not start (the run goes on without its GPUs)."""
    log = warning + "epoch 1 loss 0.41\nepoch 2 loss 0.39\n"
    assert [inc.rule for inc in diagnose_text(log).incidents] == [rule]
