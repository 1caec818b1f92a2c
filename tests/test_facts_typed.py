"""Facts are typed data, declared once (kbdebug.core.facts): every producer's names and types hold, at run time
over every rule example and the dev corpus, and for mypy in the code; one merge says who wins."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from kbdebug.api import diagnose_text
from kbdebug.authoring.facts import grammar_fields
from kbdebug.core.facts import PRECEDENCE, declarations, declared_by, merge, validate_facts
from kbdebug.kb import load_kb

CORPUS = ROOT.parent / "shared" / "corpus" / "dev"


def _own(rule_id: str) -> set[str]:
    """A rule's own facts: its `facts` templates and its patterns' named groups (strings it declares)."""
    kb = load_kb()
    rule = kb.get(rule_id)
    groups = {g for r in kb.rules for m in r.match for p in m.fields.values() for g in re.compile(p).groupindex}
    return (set(rule.facts) if rule else set()) | groups


def _problems(text: str) -> list[str]:
    out: list[str] = []
    for inc in diagnose_text(text).incidents:
        out += [f"{inc.rule}: {p}" for p in validate_facts(inc.facts, _own(inc.rule))]
        for c in inc.consequences:
            out += [f"{inc.rule} <- {c.rule}: {p}" for p in validate_facts(c.facts, _own(c.rule))]
    return out


def test_every_rule_example_says_only_declared_facts_of_their_declared_types() -> None:
    problems: list[str] = []
    examples = [t for r in load_kb().rules for t in (*r.examples.positive, *r.examples.negative)]
    assert len(examples) > 200
    for text in examples:
        problems += _problems(text)
    assert problems == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the dev corpus (../shared/corpus/dev) is absent")
def test_every_dev_corpus_log_says_only_declared_facts_of_their_declared_types() -> None:
    problems: list[str] = []
    for path in sorted(CORPUS.glob("*.log")):
        problems += [f"{path.name}: {p}" for p in _problems(path.read_text(encoding="utf-8", errors="replace"))]
    assert problems == []


def test_a_wrong_type_or_an_undeclared_name_is_said_at_run_time() -> None:
    assert validate_facts({"rank": 3, "shapes": [[4, 14, 96], [4, 1, 96]]}) == []
    assert validate_facts({"rank": "3"}) == ["rank: '3' is not <class 'int'>"]
    assert validate_facts({"rnak": 3}) == ["rnak: not a declared fact"]
    assert validate_facts({"frame_tensors": {"x": {"shape": [2], "dtype": "float32", "colour": 1}}}) != []
    assert validate_facts({"notes": "see the log"}, own={"notes"}) == []
    assert validate_facts({"notes": 3}, own={"notes"}) != []


def test_mypy_rejects_a_producer_that_writes_a_wrong_type_or_an_undeclared_name(tmp_path: Path) -> None:
    probe = tmp_path / "producer.py"
    probe.write_text(
        "from kbdebug.core.facts import Facts\n"
        "def make() -> Facts:\n"
        "    f: Facts = {}\n"
        "    f['rank'] = 'three'\n"
        "    f['rnak'] = 3\n"
        "    f['kernel_file'] = 'Loss.cu'\n"
        "    return f\n",
        encoding="utf-8",
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(probe)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    assert 'Value of "rank" has incompatible type "str"' in out
    assert '"rnak"' in out and "kernel_file" not in out


def test_every_value_a_message_grammar_reads_is_a_declared_fact_of_messages() -> None:
    assert grammar_fields("messages") - declared_by("message") == set()


def test_each_declaration_has_a_meaning_and_a_producer() -> None:
    for name, (_, fact) in declarations().items():
        assert fact.meaning and fact.by, name


def test_one_merge_applies_the_declared_precedence() -> None:
    assert PRECEDENCE[:3] == ("live", "guard", "records")
    merged = merge(
        {
            "context": {"device": "cpu", "error_type": "ctx"},
            "records": {"error_type": "RuntimeError", "rank": 2},
            "live": {"error_type": "torch.OutOfMemoryError"},
            "caller": {"script": "train.py", "rank": 9},
        }
    )
    assert merged == {"error_type": "torch.OutOfMemoryError", "rank": 2, "script": "train.py", "device": "cpu"}
    assert merge({"records": {"rank": 1}}, base={"rank": 0}) == {"rank": 0}


def test_a_rule_matching_a_field_its_record_kind_lacks_is_refused(tmp_path: Path) -> None:
    """A typo in a match's field never fires silently: the rule file is refused, saying what the kind has."""
    from kbdebug.kb import RuleFileError
    from kbdebug.kb.loader import load_rule

    head = 'id = "x"\ntitle = "a title"\n[guide]\nwhat="0123456789a"\nwhy="0123456789a"\nconfirm="0123456789a"\nfix="0123456789a"\n'
    good = tmp_path / "good.toml"
    good.write_text(head + '[[match]]\nkind = "message"\nfields = { template = "^broadcast$", "values.size_a" = "3" }\n')
    assert load_rule(good).match[0].kind == "message"
    for fields, said in (
        ('{ mesage = "x" }', "'mesage' is not a field of a 'exception' record"),
        ('{ "values.sise_a" = "3" }', "'values.sise_a' is not a field of a 'message' record"),
    ):
        kind = "message" if "values" in fields else "exception"
        bad = tmp_path / "bad.toml"
        bad.write_text(head + f'[[match]]\nkind = "{kind}"\nfields = {fields}\n')
        with pytest.raises(RuleFileError, match=re.escape(said)):
            load_rule(bad)
    kinds = tmp_path / "kind.toml"
    kinds.write_text(head + '[[match]]\nkind = "exceptoin"\n')
    with pytest.raises(RuleFileError, match=r"match\[0\]\.kind: input should be 'kernel_assert'"):
        load_rule(kinds)
