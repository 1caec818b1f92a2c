"""The match stage's shortcuts find what trying everything finds: a record is tried only against the templates
whose needed text its fields hold (kbdebug.diagnoser.match._KindIndex), and a rule's indicator phrases are looked
for only where one pass says the error may hold them (_Heard), and only the rules with such a phrase are scored
(_may_speak). All are filters in front of the same tests, so on every rule example's records the rule chosen, its
template and the phrases found must be the same without them."""

from __future__ import annotations

import pytest

from kbdebug._resources import data_dir
from kbdebug.diagnoser import inference, match
from kbdebug.kb.loader import KnowledgeBase, load_kb
from kbdebug.parse.needles import needles
from kbdebug.parse.regions import parse_regions
from kbdebug.records import Record
from kbdebug.scan import scan_text


def _records() -> list[Record]:
    out: list[Record] = []
    for path in sorted(data_dir("knowledge").glob("*/examples/*/*.log")):
        out += parse_regions(scan_text(path.read_text(encoding="utf-8", errors="replace"), needles))
    return out


def _chosen(records: list[Record]) -> list[tuple[str, str, tuple[str, ...]] | None]:
    kb = load_kb()
    out: list[tuple[str, str, tuple[str, ...]] | None] = []
    for rec in records:
        found = match.best_rule(rec, kb)
        out.append(None if found is None else (found[0].id, repr(found[1].fields), tuple(found[1].inferred_from)))
    return out


def test_the_shortcuts_choose_what_trying_every_template_and_phrase_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records()
    assert len(records) > 500
    with_index = _chosen(records)
    assert sum(c is not None for c in with_index) > 400  # the examples are mostly diagnosed: the test has teeth

    def every_template(kb: KnowledgeBase, kind: str) -> match._KindIndex:
        entries = tuple((rule, m) for rule in kb.rules for m in rule.match if m.kind == kind)
        return match._KindIndex(entries, frozenset(range(len(entries))), ())

    def every_phrase(kb: KnowledgeBase, text: str, lowered: str) -> inference._Heard:
        class Everything(inference._Heard):
            def may_fold(self, ind: inference._Phrase) -> bool:  # each phrase's texts looked for in the text itself
                return ind.folded is None or any(t in lowered for t in ind.folded)

            def may_speak(self, ind: inference._Phrase) -> bool:
                return True

        return Everything(frozenset(), frozenset())

    monkeypatch.setattr(match, "_kind_index", every_template)
    monkeypatch.setattr(inference, "_heard", every_phrase)
    monkeypatch.setattr(inference, "_may_speak", lambda kb, heard: kb.rules)
    assert _chosen(records) == with_index
