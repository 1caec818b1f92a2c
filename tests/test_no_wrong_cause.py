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
