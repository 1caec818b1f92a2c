"""`python -m kbdebug.kb` writes knowledge/rules.json, which is loaded without compiling the rules' patterns: a pattern
RE2 cannot run must be refused there, by the build, not met in a user's `explain` as a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbdebug._resources import data_dir
from kbdebug.kb import __main__ as build
from kbdebug.kb import shipped


def test_a_bundled_pattern_re2_cannot_run_is_refused_and_rules_json_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    knowledge = tmp_path / "knowledge"
    shutil.copytree(data_dir("knowledge"), knowledge)
    rule = knowledge / "other" / "rule.toml"
    rule.write_text(
        rule.read_text().replace("fields = { exc_type = 'ChildFailedError$' }", "fields = { exc_type = 'ChildFailedError(?!x)' }")
    )
    before = (knowledge / shipped.FILE).read_bytes()
    for module in (build, shipped):
        monkeypatch.setattr(module, "data_dir", lambda name: tmp_path / name)
    assert build.main() == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "other/rule.toml" in said and "RE2" in said and "not written" in said
    assert (knowledge / shipped.FILE).read_bytes() == before
