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
