"""Whether rerunning helps is part of every cause (rule-ids.md: `retry`), and reaches the JSON as a fact."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest

from kbdebug import diagnose_text
from kbdebug._resources import data_dir
from kbdebug.kb.layout import rule_paths
from kbdebug.kb.model import RETRY_VALUES

RULE_FILES = rule_paths(data_dir("knowledge"))


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.parent.name if p.name == "rule.toml" else p.stem)
def test_every_bundled_rule_says_whether_rerunning_helps(path) -> None:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data.get("retry") in RETRY_VALUES, f"{path.name}: retry must be one of {RETRY_VALUES}"


def test_retry_comes_from_the_rule_and_a_match_may_say_otherwise() -> None:
    oom = diagnose_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert oom.root is not None and oom.root.rule == "cuda_oom" and oom.root.facts["retry"] == "smaller"
    busy = diagnose_text("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable")
    assert busy.root is not None and busy.root.rule == "invalid_device" and busy.root.facts["retry"] == "yes"
    ordinal = diagnose_text("RuntimeError: CUDA error: invalid device ordinal")
    assert ordinal.root is not None and ordinal.root.rule == "invalid_device" and ordinal.root.facts["retry"] == "no"
