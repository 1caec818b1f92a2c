"""A rule is a folder: rule.toml, guide.md (Markdown with jinja2, real newlines), examples/positive|negative/*.log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from kbdebug.authoring.lint import lint_directory
from kbdebug.kb import load_kb
from kbdebug.kb.layout import join_lines, rule_paths
from kbdebug.kb.loader import read_rule

RULE = """id = "shm_user_rule"
title = "a user's rule in a folder"
priority = 99
retry = "smaller"

[[match]]
kind = "exception"
fields = { message = 'insufficient shared memory' }
"""

GUIDE = """## What it means

A DataLoader worker ran out of shared memory{% if innermost_user_frame %}
at `{{ innermost_user_frame }}`{% endif %}.

Second paragraph.

## Why it happens

`/dev/shm` is small
in containers.

## How to confirm

`df -h /dev/shm`.

## How to fix

Ask for more shared memory.
"""

POSITIVE = "RuntimeError: DataLoader worker (pid 12) is killed: insufficient shared memory (shm)\n"
NEGATIVE = "RuntimeError: CUDA error: misaligned address\n"


def make_rule(root: Path, guide: str = GUIDE, rule: str = RULE) -> Path:
    folder = root / "shm_user_rule"
    (folder / "examples" / "positive").mkdir(parents=True)
    (folder / "examples" / "negative").mkdir(parents=True)
    (folder / "rule.toml").write_text(rule, encoding="utf-8")
    (folder / "guide.md").write_text(guide, encoding="utf-8")
    (folder / "examples" / "positive" / "01.log").write_text(POSITIVE, encoding="utf-8")
    (folder / "examples" / "negative" / "01.log").write_text(NEGATIVE, encoding="utf-8")
    return folder / "rule.toml"


def test_a_folder_rule_reads_its_guide_and_examples(tmp_path: Path) -> None:
    path = make_rule(tmp_path)
    assert rule_paths(tmp_path) == [path]
    rule, problems = read_rule(path)
    assert problems == [] and rule is not None
    assert rule.guide.what == (
        "A DataLoader worker ran out of shared memory{% if innermost_user_frame %} at `{{ innermost_user_frame }}`{% endif %}."
        "\n\nSecond paragraph."
    )
    assert rule.guide.why == "`/dev/shm` is small in containers."
    assert rule.examples.positive == [POSITIVE] and rule.examples.negative == [NEGATIVE]
    assert lint_directory(tmp_path) == []


def test_a_folder_rule_diagnoses_and_an_edited_example_is_seen_at_once(tmp_path: Path) -> None:
    """Examples are read when asked for (a diagnosis never needs them): an edited one is seen by the next reader."""
    make_rule(tmp_path)
    proc = run_cli("explain", "--format", "json", "--kb", str(tmp_path), "-", stdin=POSITIVE.encode())
    assert b'"rule": "shm_user_rule"' in proc.stdout and b'"retry": "smaller"' in proc.stdout
    first = load_kb([tmp_path])
    (tmp_path / "shm_user_rule" / "examples" / "positive" / "02.log").write_text(POSITIVE + "again\n", encoding="utf-8")
    second = load_kb([tmp_path])
    rule = second.get("shm_user_rule")
    assert rule is not None and len(rule.examples.positive) == 2
    assert first.get("shm_user_rule") is not None and len(first.get("shm_user_rule").examples.positive) == 2  # type: ignore[union-attr]


def test_a_broken_folder_names_the_file_and_the_problem(tmp_path: Path) -> None:
    path = make_rule(tmp_path, guide=GUIDE.replace("## How to fix", "## How to repair"))
    rule, problems = read_rule(path)
    assert rule is None and len(problems) == 1
    assert problems[0].startswith(f"{tmp_path / 'shm_user_rule' / 'guide.md'}: unknown section '## How to repair'")
    path.write_text(RULE + '\n[guide]\nwhat = "inline"\n', encoding="utf-8")
    (tmp_path / "shm_user_rule" / "guide.md").write_text(GUIDE, encoding="utf-8")
    assert read_rule(path)[1] == [f"{path}: [guide] belongs in guide.md beside it, not in rule.toml"]
    (tmp_path / "shm_user_rule" / "guide.md").unlink()
    path.write_text(RULE, encoding="utf-8")
    assert "cannot read" in read_rule(path)[1][0]


def test_line_breaks_inside_a_paragraph_are_spaces() -> None:
    assert join_lines("  a\n  b\n\n c \n") == "a b\n\nc"
    assert join_lines("{% if x %}\nyes\n{% endif %}") == "{% if x %} yes {% endif %}"


def test_what_stands_before_the_first_section_is_shared_by_all_four(tmp_path: Path) -> None:
    """A case decided once (`{% set %}`), not the same branch tree written in what, why and fix."""
    shared = "{% set wanted = num_classes if num_classes is number else 'C' %}\n\n"
    guide = shared + GUIDE.replace("Ask for more shared memory.", "One-hot with {{ wanted }} channels.")
    path = make_rule(tmp_path, guide=guide)
    rule, problems = read_rule(path)
    assert problems == [] and rule is not None and all(s.startswith("{% set wanted") for s in (rule.guide.what, rule.guide.fix))
    from kbdebug.diagnoser.guides import fill_text

    assert fill_text(rule.guide.fix, {"num_classes": 5}) == "One-hot with 5 channels."
    assert fill_text(rule.guide.fix, {}) == "One-hot with C channels."


def test_every_bundled_rule_is_a_folder_written_without_continued_lines() -> None:
    """One home per rule: its folder. Guides are Markdown with real newlines, not TOML strings continued by `\\`."""
    from kbdebug._resources import data_dir

    knowledge = data_dir("knowledge")
    paths = rule_paths(knowledge)
    assert len(paths) >= 50 and all(p.name == "rule.toml" and p.parent.name == p.parent.name.lower() for p in paths)
    for path in paths:
        folder = path.parent
        assert (folder / "guide.md").is_file(), folder
        assert len(list((folder / "examples" / "positive").glob("*.log"))) >= 2, folder
        assert len(list((folder / "examples" / "negative").glob("*.log"))) >= 2, folder
    continued = [
        f"{p}:{n}"
        for p in knowledge.rglob("*")
        if p.suffix in (".toml", ".md", ".j2")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if line.endswith("\\")
    ]
    assert continued == []


def test_one_bundled_rule_folder_lints_as_bundled() -> None:
    """`kbdebug rules lint knowledge/native_crash`: its references to other rules resolve, and it is no user
    rule replacing itself."""
    from kbdebug._resources import data_dir

    warnings: list[str] = []
    assert lint_directory(data_dir("knowledge") / "native_crash", warnings) == [] and warnings == []
    assert lint_directory(data_dir("knowledge") / "async_error_unlocalized" / "rule.toml", warnings) == [] and warnings == []


def test_an_example_that_is_not_text_is_a_lint_problem_not_a_traceback(tmp_path: Path) -> None:
    make_rule(tmp_path)
    (tmp_path / "shm_user_rule" / "examples" / "negative" / "02.log").write_bytes(b"\xff\xfe broken")
    problems = lint_directory(tmp_path)
    assert len(problems) == 1 and "examples/negative: an example is not UTF-8 text" in problems[0], problems
    proc = run_cli("explain", "--format", "json", "--kb", str(tmp_path), "-", stdin=POSITIVE.encode())
    assert b'"rule": "shm_user_rule"' in proc.stdout  # the rule still diagnoses: examples are not read to diagnose


def test_the_shipped_rules_are_what_their_files_say_now() -> None:
    """knowledge/rules.json holds each bundled rule folder as read from its files (a run with no cache then parses
    no TOML): `python -m kbdebug.kb` writes it after a rule is edited."""
    import json

    from kbdebug._resources import data_dir
    from kbdebug.kb import shipped

    on_disk = json.loads((data_dir("knowledge") / shipped.FILE).read_text(encoding="utf-8"))
    assert on_disk == json.loads(json.dumps(shipped.snapshot())), "knowledge/rules.json is stale: run `python -m kbdebug.kb` and commit it"


def test_an_edited_bundled_rule_is_read_from_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped data is used only for the very bytes it was read from: an edited rule.toml or guide.md is read
    from the files, a damaged entry costs the reading, and either way the rule is what its files say."""
    from kbdebug._resources import data_dir
    from kbdebug.kb import loader, shipped
    from kbdebug.kb.layout import read_rule_files

    path = data_dir("knowledge") / "other" / "rule.toml"
    toml = path.read_bytes()
    shipped_data = shipped.read(path, toml)
    assert shipped_data is not None and shipped_data == read_rule_files(path, toml)[0]
    assert shipped.read(path, toml + b"\n# edited\n") is None
    folder = tmp_path / "other"
    shutil.copytree(path.parent, folder)
    (folder / "guide.md").write_text((folder / "guide.md").read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    assert shipped.read(folder / "rule.toml", toml) is None  # the same rule.toml, another guide
    edited = toml.replace(b'title = "', b'title = "EDITED ', 1)
    assert edited != toml
    rule = loader.load_rule(path, edited, bundled=True)
    assert rule.title.startswith("EDITED ")
    monkeypatch.setattr(
        shipped, "_shipped", lambda: {"other": {"hash": shipped.digest(toml, (path.parent / "guide.md").read_bytes()), "data": []}}
    )
    assert shipped.read(path, toml) is None
    assert loader.load_rule(path, toml, bundled=True).title == loader.load_rule(path, toml).title


def test_a_pattern_s_texts_are_shipped_by_the_pattern_itself() -> None:
    """The texts every match of a bundled pattern holds travel in knowledge/rules.json, keyed by the pattern: an
    edited or a user's pattern is read off the pattern itself."""
    from kbdebug.core import phrases
    from kbdebug.kb import shipped

    bundled = next(rule for rule in load_kb().rules if rule.indicators)
    pattern = bundled.indicators[0].pattern
    assert pattern in shipped._texts() and shipped.required_texts(pattern) == phrases.required_texts(pattern)
    mine = r"my own (?:wording|phrase) of \d+ things"
    assert mine not in shipped._texts() and shipped.required_texts(mine) == frozenset({"my own wording of ", "my own phrase of "})


CASE = """---
when: error_message is string and "rank" in error_message
---
{%- set who = "the ranks" -%}

## What it means

It was {{ who }}.

## How to fix

Give {{ who }} more shared memory.
"""


def test_a_case_page_stands_in_for_the_guide_where_its_test_holds(tmp_path: Path) -> None:
    """cases/*.md: its What it means follows the guide's, its other sections replace the guide's; elsewhere the
    guide is as it was; a case edited, added or removed is seen by the next load."""
    path = make_rule(tmp_path)
    cases = tmp_path / "shm_user_rule" / "cases"
    cases.mkdir()
    (cases / "ranks.md").write_text(CASE, encoding="utf-8")
    rule, problems = read_rule(path)
    assert problems == [] and rule is not None
    from kbdebug.diagnoser.guides import fill_text

    ranked, plain = {"error_message": "rank 3 failed"}, {"error_message": "a worker failed"}

    def fill(section: str, facts: dict[str, str]) -> str:
        return fill_text(section, facts, cases=rule.guide.cases)

    assert fill(rule.guide.what, ranked) == "A DataLoader worker ran out of shared memory.\n\nSecond paragraph. It was the ranks."
    assert fill(rule.guide.fix, ranked) == "Give the ranks more shared memory."
    assert fill(rule.guide.why, ranked) == "`/dev/shm` is small in containers."  # the case has no Why: the guide's
    assert fill(rule.guide.what, plain).endswith("Second paragraph.") and fill(rule.guide.fix, plain) == "Ask for more shared memory."
    assert lint_directory(tmp_path) == []
    first = load_kb([tmp_path]).get("shm_user_rule")
    (cases / "ranks.md").write_text(CASE.replace("more shared memory", "a larger /dev/shm"), encoding="utf-8")
    edited = load_kb([tmp_path]).get("shm_user_rule")
    assert first is not None and edited is not None and "a larger /dev/shm" in edited.guide.cases["ranks.fix"]
    (cases / "ranks.md").unlink()
    removed = load_kb([tmp_path]).get("shm_user_rule")
    assert removed is not None and removed.guide.fix == "Ask for more shared memory."


@pytest.mark.parametrize(
    ("page", "said"),
    [
        ("## How to fix\n\nno test.\n", "a case starts with its test"),
        ("---\nwhen:\n---\n## How to fix\n\nx.\n", "a case starts with its test"),
        ("---\nwhen: x\nunless: y\n---\n## How to fix\n\nx.\n", "a case starts with its test"),
        ("---\nwhen: x\n---\nno section.\n", "a case has at least one section"),
        ("---\nwhen: x\n---\n## How to repair\n\nx.\n", "unknown section '## How to repair'"),
    ],
)
def test_a_broken_case_page_names_its_file_and_the_problem(tmp_path: Path, page: str, said: str) -> None:
    path = make_rule(tmp_path)
    (tmp_path / "shm_user_rule" / "cases").mkdir()
    (tmp_path / "shm_user_rule" / "cases" / "bad.md").write_text(page, encoding="utf-8")
    rule, problems = read_rule(path)
    assert rule is None and len(problems) == 1
    assert problems[0].startswith(str(tmp_path / "shm_user_rule" / "cases" / "bad.md")) and said in problems[0]


def test_a_case_page_is_its_own_fragment_checked_at_load(tmp_path: Path) -> None:
    """A guide calls each case by its key (`case("ranks.fix")`), its text kept beside the sections and compiled only
    when reached: its syntax is still checked when the rule is read, and lint reads its facts as if it were written
    into the guide."""
    from kbdebug.kb.layout import inlined

    path = make_rule(tmp_path)
    (tmp_path / "shm_user_rule" / "cases").mkdir()
    (tmp_path / "shm_user_rule" / "cases" / "ranks.md").write_text(CASE, encoding="utf-8")
    rule, _ = read_rule(path)
    assert rule is not None and 'case("ranks.fix")' in rule.guide.fix and sorted(rule.guide.cases) == ["ranks.fix", "ranks.what"]
    assert rule.guide.cases["ranks.fix"] == "Give {{ who }} more shared memory." and "Give {{ who }}" not in rule.guide.fix
    whole = inlined(rule.guide.fix, rule.guide.cases)
    assert "case(" not in whole and "Give {{ who }} more shared memory." in whole
    (tmp_path / "shm_user_rule" / "cases" / "ranks.md").write_text(CASE.replace("more shared memory", "{% if %}"), encoding="utf-8")
    rule, problems = read_rule(path)
    assert rule is None and any("guide.fix" in p for p in problems)
