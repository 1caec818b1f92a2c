"""`kbdebug rules lint` and `rules show` on rule files with each kind of mistake, written here."""

from __future__ import annotations

import json
from pathlib import Path

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
        what="The value {{ eror_message }} and {{ mine }} at {{ cublas_status }}.",
    )
    rule_file(tmp_path, "unclosed", 'id = "unclosed"\ntitle = "a user rule"', what="The value {% if x %} never closed.")
    problems = lint_directory(tmp_path)
    typo = [p for p in problems if "typo.toml" in p]
    assert len(typo) == 3
    assert "guide.what: `eror_message` is not a fact" in typo[0]
    assert "checks[0]: no check named 'class_target'" in typo[1] and "class_targets" in typo[1]
    assert "consequence_of[0]: no rule with id 'no_such_rule'" in typo[2]
    assert [p.split(": ")[1] for p in problems if "unclosed.toml" in p] == ["guide.what"]


def test_duplicate_ids_and_empty_directory(tmp_path: Path) -> None:
    assert lint_directory(tmp_path) == [f"{tmp_path}: no rule files (*.toml) in this directory"]
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


def test_fact_vocabulary_holds_every_fact_kbdebug_produced() -> None:
    from test_diagnosis import RULE_FIXTURES

    from kbdebug.api import diagnose_text
    from kbdebug.authoring.lint import fact_vocabulary
    from kbdebug.kb import load_kb

    names, patterns = fact_vocabulary()
    kb = load_kb()
    produced = {
        key
        for text in RULE_FIXTURES.values()
        for inc in diagnose_text(text).incidents
        for key in inc.facts
        if key not in kb.get(inc.rule).facts
    }  # a rule's own derived facts are checked per rule
    assert len(produced) > 20
    assert {k for k in produced if k not in names and not any(p.match(k) for p in patterns)} == set()
    assert "eror_message" not in names and not any(p.match("eror_message") for p in patterns)
