"""Every rule carries its contract as examples: positives diagnosed as the rule, negatives not.

A new wording of a known cause is one TOML edit plus its example; this test is what proves it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kbdebug._resources import data_dir
from kbdebug.authoring.examples import check_example, check_examples
from kbdebug.kb.layout import rule_paths
from kbdebug.kb.loader import load_rule
from kbdebug.kb.model import Rule

BUNDLED: list[Rule] = [load_rule(path) for path in rule_paths(data_dir("knowledge"))]


def _cases(positive: bool) -> list:
    cases = []
    for rule in BUNDLED:
        snippets = rule.examples.positive if positive else rule.examples.negative
        for index, snippet in enumerate(snippets):
            cases.append(pytest.param(rule, snippet, id=f"{rule.id}-{'pos' if positive else 'neg'}{index}"))
    return cases


@pytest.fixture(autouse=True)
def _bundled_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules from the user's KBDEBUG_KNOWLEDGE must not change what the bundled examples mean."""
    monkeypatch.delenv("KBDEBUG_KNOWLEDGE", raising=False)


def test_bundled_rules_were_found() -> None:
    assert len(BUNDLED) >= 30
    assert len({rule.id for rule in BUNDLED}) == len(BUNDLED)


@pytest.mark.parametrize("rule", BUNDLED, ids=lambda rule: rule.id)
def test_every_rule_has_two_examples_each_way(rule: Rule) -> None:
    assert len(rule.examples.positive) >= 2, f"{rule.id}: fewer than 2 positive examples"
    assert len(rule.examples.negative) >= 2, f"{rule.id}: fewer than 2 negative examples"


@pytest.mark.parametrize(("rule", "snippet"), _cases(positive=True))
def test_positive_example_is_diagnosed_as_its_rule(rule: Rule, snippet: str) -> None:
    assert check_example(rule, snippet, positive=True) is None


@pytest.mark.parametrize(("rule", "snippet"), _cases(positive=False))
def test_negative_example_is_not_diagnosed_as_its_rule(rule: Rule, snippet: str) -> None:
    assert check_example(rule, snippet, positive=False) is None


USER_RULE = """\
id = "flash_attn_missing"
title = "flash-attn is not installed"
priority = 70

[[match]]
kind = "exception"
fields = {{ message = 'requires? (?:the )?flash_attn|No module named .flash_attn' }}
confidence = 0.9

[guide]
what = "The model asks for FlashAttention but the package is missing."
why = "attn_implementation='flash_attention_2' imports flash_attn at load time."
confirm = "Run `python -c 'import flash_attn'`."
fix = "Install flash-attn built for your torch and CUDA, or use attn_implementation='sdpa'."

[examples]
positive = [
'''
Traceback (most recent call last):
  File "load.py", line 3, in <module>
    import flash_attn
ModuleNotFoundError: No module named 'flash_attn'
''',
{extra_positive}]
negative = [
'''
Traceback (most recent call last):
  File "load.py", line 3, in <module>
    import xformers
ModuleNotFoundError: No module named 'xformers'
''',
]
"""

WRONG_POSITIVE = """'''
RuntimeError: CUDA error: an illegal memory access was encountered
''',
"""


def _user_rule(tmp_path: Path, extra_positive: str) -> Rule:
    path = tmp_path / "flash_attn_missing.toml"
    path.write_text(USER_RULE.format(extra_positive=extra_positive), encoding="utf-8")
    return load_rule(path)


def test_user_rule_examples_pass_in_the_kb_they_are_loaded_with(tmp_path: Path) -> None:
    rule = _user_rule(tmp_path, "")
    assert check_examples(rule, [tmp_path]) == []


def test_user_rule_examples_fail_without_their_rule_directory(tmp_path: Path) -> None:
    rule = _user_rule(tmp_path, "")
    assert check_examples(rule) == [
        "flash_attn_missing: positive example 1 (\"ModuleNotFoundError: No module named 'flash_attn'\") is diagnosed as import_failure"
    ]


def test_a_wrong_user_example_is_one_problem_line_naming_rule_and_result(tmp_path: Path) -> None:
    rule = _user_rule(tmp_path, WRONG_POSITIVE)
    assert check_examples(rule, [tmp_path]) == [
        "flash_attn_missing: positive example 2 ('RuntimeError: CUDA error: an illegal memory access was encountered') "
        "is diagnosed as illegal_memory_access"
    ]


WRONG_NEGATIVE = """'''
ModuleNotFoundError: No module named 'flash_attn.flash_attn_interface'
''',
"""


def test_a_negative_example_that_the_rule_claims_is_a_problem(tmp_path: Path) -> None:
    text = USER_RULE.format(extra_positive="").replace("negative = [\n", "negative = [\n" + WRONG_NEGATIVE)
    path = tmp_path / "flash_attn_missing.toml"
    path.write_text(text, encoding="utf-8")
    assert check_examples(load_rule(path), [tmp_path]) == [
        "flash_attn_missing: negative example 1 (\"ModuleNotFoundError: No module named 'flash_attn.flash_attn_interface'\") "
        "is diagnosed as flash_attn_missing"
    ]
