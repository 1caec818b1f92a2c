"""`kbdebug rules lint` and `rules show` on rule files with each kind of mistake, written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from kbdebug.authoring.lint import lint_directory

GUIDE = '[guide]\nwhat = "{what}"\nwhy = "Because it happened here."\nconfirm = "Confirm it with a check."\nfix = "Fix the data before the loss."\n'


def rule_file(directory: Path, name: str, head: str, what: str = "The value {{ error_message }} was wrong.") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(head + '\n[[match]]\nkind = "message"\nfields = { template = "^target_oob$" }\n' + GUIDE.format(what=what))
    return path


def test_every_problem_of_a_file_is_listed_with_field_and_sentence(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'id = "Bad-Id"\ntitle = "x"\npriority = 300\ncolour = "red"\n'
        '[[match]]\nkind = "kernel_asert"\nfields = { condition = "(unclosed" }\n'
        '[guide]\nwhat = "The value {{ error_message  was wrong"\nwhy = "short"\n'
        'confirm = "Confirm it with a check."\nfix = "Fix the data before the loss."\n'
    )
    problems = lint_directory(tmp_path)
    fields = [line.split(": ")[1] for line in problems]
    assert all(line.startswith(f"{path}: ") for line in problems)
    assert fields == ["id", "title", "priority", "match[0].kind", "match[0].fields", "guide.why", "colour", "guide.what"]
    assert "got 'kernel_asert'" in problems[3] and "'kernel_assert'" in problems[3]
    assert "unknown field" in problems[6]
    assert "template does not compile" in problems[7]
    assert not any("Field required" in p or "Value error" in p for p in problems)


def test_templates_variables_checks_and_rule_ids_are_checked(tmp_path: Path) -> None:
    rule_file(
        tmp_path,
        "typo",
        'id = "typo"\ntitle = "a user rule"\nchecks = ["class_target"]\n'
        'consequence_of = ["no_such_rule", "nll_target_out_of_range"]\n[facts]\nmine = "{{ kernel_file }}!"',
        what="The value {{ eror_message }} and {{ mine }} at {{ innermost_user_frame }} ({{ target }}).",
    )
    rule_file(tmp_path, "unclosed", 'id = "unclosed"\ntitle = "a user rule"', what="The value {% if x %} never closed.")
    problems = lint_directory(tmp_path)
    typo = [p for p in problems if "typo.toml" in p]
    assert len(typo) == 4
    assert "guide.what: rule 'typo' uses `eror_message`, a fact its matches (message) never produce" in typo[0]
    assert "facts.mine: rule 'typo' uses `kernel_file`" in typo[1]  # a kernel assert's fact: a message has none
    assert "checks[0]: no check named 'class_target'" in typo[2] and "class_targets" in typo[2]
    assert "consequence_of[0]: no rule with id 'no_such_rule'" in typo[3]
    assert [p.split(": ")[1] for p in problems if "unclosed.toml" in p] == ["guide.what"]


MATCHES = {
    "message": '[[match]]\nkind = "message"\nfields = { template = "^target_oob$" }\n',
    "kernel_assert": '[[match]]\nkind = "kernel_assert"\nfields = { kernel_file = "^MyKernel\\\\.cu$" }\n',
    "named_group": '[[match]]\nkind = "message"\nfields = { text = "(?P<bad_target>-?\\\\d+) is out of bounds" }\npriority = 100\n',
}


def one_rule(directory: Path, match: str, what: str) -> list[str]:
    (directory / "r.toml").write_text('id = "r"\ntitle = "a user rule"\n' + MATCHES[match] + GUIDE.format(what=what))
    return lint_directory(directory)


def test_a_guide_variable_is_checked_against_the_facts_of_its_own_matches(tmp_path: Path) -> None:
    used = "The kernel {% if kernel_file %}{{ kernel_file }}{% endif %} asserted at {{ innermost_user_frame }}."
    flagged = one_rule(tmp_path, "message", used)
    assert len(flagged) == 1  # the guarded use counts: a message record never has a kernel file
    assert flagged[0].startswith(f"{tmp_path / 'r.toml'}: guide.what: rule 'r' uses `kernel_file`, a fact its matches (message)")
    assert one_rule(tmp_path, "kernel_assert", used) == []  # a kernel assert produces it
    assert one_rule(tmp_path, "message", "The target {{ target }} of {{ message_template }} on {{ device }}.") == []
    assert len(one_rule(tmp_path, "kernel_assert", "The target {{ target }} was out of range.")) == 1


def test_a_named_group_of_a_pattern_is_a_fact_of_its_rule(tmp_path: Path) -> None:
    assert one_rule(tmp_path, "named_group", "The target {{ bad_target }} is not a class.") == []
    assert len(one_rule(tmp_path, "message", "The target {{ bad_target }} is not a class.")) == 1
    one_rule(tmp_path, "named_group", "The target {{ bad_target }} is not a class.")  # and the matcher fills it in:
    log = tmp_path / "crash.log"
    log.write_text("IndexError: Target 17 is out of bounds.\n")
    proc = run_cli("explain", "--format", "json", "--kb", str(tmp_path), str(log))
    inc = json.loads(proc.stdout)["incidents"][0]
    assert (inc["rule"], inc["facts"]["bad_target"], inc["guide"]["what"]) == ("r", "17", "The target 17 is not a class.")


def test_duplicate_ids_and_empty_directory(tmp_path: Path) -> None:
    assert lint_directory(tmp_path) == [f"{tmp_path}: no rules in this directory (a folder <id>/rule.toml, or a file <id>.toml)"]
    rule_file(tmp_path, "a", 'id = "same"\ntitle = "a user rule"')
    rule_file(tmp_path, "b", 'id = "same"\ntitle = "a user rule"')
    assert lint_directory(tmp_path) == [f"{tmp_path / 'b.toml'}: id: 'same' is already defined in {tmp_path / 'a.toml'}"]


def test_bundled_rules_are_clean_and_cli_exit_status(tmp_path: Path) -> None:
    assert lint_directory(ROOT / "knowledge") == []
    rule_file(tmp_path, "good", 'id = "good"\ntitle = "a user rule"')
    assert run_cli("rules", "lint", str(tmp_path)).returncode == 0
    rule_file(tmp_path, "bad", 'id = "bad"\ntitle = "x"', what="{{ nope }} is not a fact at all")
    proc = run_cli("rules", "lint", str(tmp_path))
    assert proc.returncode == 1 and len(proc.stdout.decode().splitlines()) == 2
    assert proc.stderr.decode().strip() == "2 problems in 1 file"


def test_broken_template_user_rule_does_not_reach_the_guide(tmp_path: Path) -> None:
    rule_file(
        tmp_path,
        "nll_target_out_of_range",
        'id = "nll_target_out_of_range"\ntitle = "override"',
        what="The value {{ error_message  was wrong",
    )
    proc = run_cli("explain", "--format", "json", "--kb", str(tmp_path), str(ROOT / "examples" / "segmentation_crash.log"))
    out = json.loads(proc.stdout)
    assert out["incidents"][0]["rule"] == "nll_target_out_of_range" and "template error" not in proc.stdout.decode()
    assert out["incidents"][0]["title"] != "override" and "guide.what" in proc.stderr.decode()


def test_rules_show_prints_matches_and_fills_the_guide() -> None:
    shown = run_cli("rules", "show", "nll_target_out_of_range").stdout.decode()
    assert "Matches:" in shown and 'condition = "(?:cur_)?t(?:arget)?' in shown and "priority: 93" in shown
    assert "What it means" in shown and "How to fix" in shown
    proc = run_cli("rules", "show", "no_such_rule")
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1


def test_each_rule_vocabulary_holds_every_fact_kbdebug_produced_for_it() -> None:
    from test_diagnosis import RULE_FIXTURES

    from kbdebug.api import diagnose_text
    from kbdebug.authoring.facts import rule_vocabulary
    from kbdebug.authoring.lint import folded_kinds
    from kbdebug.kb import load_kb
    from kbdebug.kb.loader import read_rule_data

    kb = load_kb()
    data = {r.id: read_rule_data(kb.sources[r.id])[2] for r in kb.rules}
    vocab = {rid: rule_vocabulary(d, folded_kinds(d, kb.rules)) for rid, d in data.items()}
    texts = list(RULE_FIXTURES.values()) + [s for r in kb.rules for s in r.examples.positive]
    produced = {(inc.rule, key) for text in texts for inc in diagnose_text(text).incidents for key in inc.facts}
    assert len({key for _, key in produced}) > 60 and {rule for rule, _ in produced} == {r.id for r in kb.rules}
    assert {(rule, key) for rule, key in produced if key not in vocab[rule]} == set()
    assert "eror_message" not in vocab["nll_target_out_of_range"] and "first_thread" not in vocab["cuda_oom"]


def test_an_example_diagnosed_as_another_cause_is_a_lint_problem(tmp_path: Path) -> None:
    examples = '[examples]\npositive = ["IndexError: Target 3 is out of bounds.", "RuntimeError: CUDA error: misaligned address"]\n'
    rule_file(tmp_path, "ex", 'id = "ex"\ntitle = "a user rule"\npriority = 99\n' + examples)
    assert lint_directory(tmp_path) == [
        f"{tmp_path / 'ex.toml'}: examples: ex: positive example 2 ('RuntimeError: CUDA error: misaligned address') "
        "is diagnosed as misaligned_address"
    ]


MISTAKES = {
    "toml": ("id = 'oops\n", "not valid TOML"),
    "schema": ('id = "m"\ntitle = "a user rule"\npriority = 300\n', "priority"),
    "kind": ('id = "m"\ntitle = "a user rule"\n[[match]]\nkind = "kernel_asert"\n', "match[0].kind"),
    "pattern": ('id = "m"\ntitle = "a user rule"\n[[match]]\nkind = "message"\nfields = { text = "(a+)+$" }\n', "match[0].fields"),
    "template": ('id = "m"\ntitle = "a user rule"\n[[match]]\nkind = "message"\n', "guide.what"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_kind_of_mistake_is_skipped_with_a_warning_and_the_rest_still_work(tmp_path: Path, mistake: str) -> None:
    text, field = MISTAKES[mistake]
    guide = GUIDE.format(what="{{ error_message " if mistake == "template" else "The value was wrong here.")
    (tmp_path / "broken.toml").write_text(text + (guide if mistake in ("kind", "pattern", "template") else ""))
    examples = '[examples]\npositive = ["IndexError: Target 7 is out of bounds."]\n'
    rule_file(tmp_path, "good", 'id = "good"\ntitle = "a user rule"\npriority = 99\n' + examples, what="Target {{ target }} is no class.")
    proc = run_cli("rules", "show", "good", "--kb", str(tmp_path))
    warning = proc.stderr.decode().splitlines()
    assert len(warning) == 1 and "rule skipped" in warning[0] and "broken.toml" in warning[0] and field in warning[0]
    shown = proc.stdout.decode()
    assert proc.returncode == 0 and 'template = "^target_oob$"' in shown and "| IndexError: Target 7 is out of bounds." in shown
    assert "Guide, rendered on the first positive example:" in shown and "Target 7 is no class." in shown
    assert any(line.startswith(f"{tmp_path / 'broken.toml'}: ") and field in line for line in lint_directory(tmp_path))


MINE = (
    'id = "my_key_error"\ntitle = "a config key is missing"\npriority = 50\nretry = "no"\n'
    "[[match]]\nkind = \"exception\"\nfields = { exc_type = 'KeyError' }\nconfidence = 0.9\n"
    '[guide]\nwhat = "The key {{ error_message }} is not in the dict."\nwhy = "A lookup used a key that is absent."\n'
    'confirm = "Print the keys of the dict."\nfix = "Add the key to the configuration."\n'
    "[examples]\n"
    'positive = ["Traceback (most recent call last):\\n  File \\"x.py\\", line 1, in <module>\\nKeyError: \'lr\'\\n", "KeyError: \'a\'\\n"]\n'
    'negative = ["epoch 1\\n", "ValueError: a bad value\\n"]\n'
)


def test_lint_takes_one_file_and_says_each_problem_once(tmp_path: Path) -> None:
    """#30: `rules lint FILE.toml` lints that file; a broken file's problems are listed once, not again as
    the loader's "rule skipped" warning; a missing path is a usage error (2)."""
    (tmp_path / "mine.toml").write_text(MINE)
    (tmp_path / "bad.toml").write_text("title = 1\n")
    one = run_cli("rules", "lint", str(tmp_path / "mine.toml"))
    assert one.returncode == 0 and one.stdout.decode() == f"{tmp_path / 'mine.toml'}: all rule files valid\n"
    both = run_cli("rules", "lint", str(tmp_path))
    out = both.stdout.decode() + both.stderr.decode()
    assert both.returncode == 1 and out.count("id: this field is required but missing") == 1 and "rule skipped" not in out
    missing = run_cli("rules", "lint", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.decode().count("\n") == 1


def test_a_user_rule_replacing_a_bundled_one_is_said(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(ROOT / "knowledge" / "other", tmp_path / "other")  # a user's copy of a bundled rule folder
    lint = run_cli("rules", "lint", str(tmp_path))
    assert lint.returncode == 0 and b"'other' replaces the bundled rule of that id" in lint.stderr
    assert b"(1 warning)" in lint.stdout
    explain = run_cli("explain", "--kb", str(tmp_path), str(ROOT / "examples" / "segmentation_crash.log"))
    assert f"kbdebug: note: {tmp_path / 'other' / 'rule.toml'} replaces the bundled rule 'other'".encode() in explain.stderr


def test_lint_lists_check_names_without_importing_torch() -> None:
    """#30: lint read the check names by importing the verifier, hence torch (1.5-3 s, a NumPy warning)."""
    import subprocess
    import sys

    code = (
        "import sys\nsys.modules['torch'] = None\n"  # any import of torch fails
        "from kbdebug.authoring.lint import known_checks\n"
        "print(sorted(known_checks()))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    RUNNERS = pytest.importorskip("kbdebug.verify.catalog").RUNNERS  # the table itself, read with torch

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.decode().replace("'", '"')) == sorted(RUNNERS)


def test_rules_show_markdown_and_html_are_their_format() -> None:
    md = run_cli("rules", "show", "-f", "markdown", "embedding_index_oob").stdout.decode()
    assert md.startswith("## embedding_index_oob: ") and "```text\n" in md and "**Matches**" in md and "### Root cause" in md
    page = run_cli("rules", "show", "-f", "html", "embedding_index_oob").stdout.decode()
    assert page.startswith("<!DOCTYPE html>") and page.count("<html") == 1 and page.rstrip().endswith("</body></html>")
    assert page.index('<section class="rule">') < page.index("What it means")


def test_parse_on_a_clean_log_reads_nothing(tmp_path: Path) -> None:
    clean = tmp_path / "train.log"
    clean.write_text("Epoch 1/10\nstep 100 loss 0.52\nerror rate: 0.05\nNo errors found\nException handling enabled\n")
    proc = run_cli("parse", str(clean))
    assert proc.returncode == 1 and proc.stdout == b""


def test_a_template_that_parses_but_does_not_compile_as_guides_compile_it_is_a_problem(tmp_path: Path) -> None:
    """jinja2 quotes a fragment's name (its text) into an `if` without `else`: with a double quote in the text,
    the generated code is no Python, and the guide would show its own source."""
    path = rule_file(
        tmp_path, "quoted_if", 'id = "quoted_if"\ntitle = "an inline if"', what='Run `{{ \\"sudo \\" if error_message }}ls` first.'
    )
    problems = lint_directory(tmp_path)
    assert len(problems) == 1 and problems[0].startswith(f"{path}: guide.what: template does not compile to Python (line ")
    assert problems[0].endswith("; write each `if` with its `else`")
    rule_file(
        tmp_path,
        "quoted_if",
        'id = "quoted_if"\ntitle = "an inline if"',
        what='Run `{{ \\"sudo \\" if error_message else \\"\\" }}ls` first.',
    )
    assert lint_directory(tmp_path) == []


def test_lint_of_a_folder_whose_knowledge_base_does_not_load_says_so_on_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken bundled rule stops every knowledge base from loading: its examples, and every other rule's, cannot
    run. lint lists the file's problem and says once that no example ran, rather than ending in a traceback."""
    from kbdebug.authoring import lint
    from kbdebug.kb import RuleFileError

    def no_knowledge_base(*_: object) -> list[str]:
        raise RuleFileError("knowledge/x/rule.toml: not valid TOML: Unclosed inline table (at line 3, column 9)")

    monkeypatch.setattr(lint, "check_examples", no_knowledge_base)
    rule_file(tmp_path, "first", 'id = "first"\ntitle = "a first rule"')
    rule_file(tmp_path, "second", 'id = "second"\ntitle = "a second rule"')
    assert lint_directory(tmp_path) == [
        f"{tmp_path}: examples: not run: no knowledge base loads while a rule file is broken (see its lines)"
    ]
