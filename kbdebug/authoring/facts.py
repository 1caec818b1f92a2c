"""Which facts a rule's guide can use: those its matches can produce, read from their declarations.

A guide variable is filled from the incident's facts, each declared once in kbdebug.core.facts with the
producers that make it. A rule's guide may use what
- the records the rule's matches name say (the facts declared as theirs; a message's are the values its
  grammar reads, each named after the rule that reads it);
- the records of the causes folded into it (rules whose `consequence_of` names it, a group of it, or `*`);
- the context every incident may carry (the live frames, the matcher, the caller, the context stage, and
  what the traceback every incident is located by says);
- for a rule with `guard_ops`, `kbdebug.guard()` reports;
- the rule itself: its own `facts`, and the named groups of its patterns.

Only declarations are read, never the code that sets facts: renaming a variable anywhere changes no
lint result, and tests/test_fact_declarations.py keeps the declarations true to what kbdebug produces.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from lark import Transformer

from kbdebug import records
from kbdebug.core.facts import declared_by
from kbdebug.parse.registry import defined_in
from kbdebug.parse.sources import folder
from kbdebug.parse.sources import source as grammar_source
from kbdebug.records import PyException

_RULE = re.compile(r"^[?!]?([a-z][a-z0-9_]*)(?:\.\d+)?\s*:", re.M)
_ALIASED = re.compile(r"^[?!]?([a-z][a-z0-9_]*)(?:\.\d+)?\s*:[^|\n]*->\s*[a-z][a-z0-9_]*\s*$", re.M)
_START = re.compile(r"^start\s*:(.*?)(?=^[?!]?[a-z][a-z0-9_]*(?:\.\d+)?\s*:|\Z)", re.M | re.S)


def _record_kinds() -> list[type[records.Record]]:
    found: list[type[records.Record]] = []
    todo = [records.Record]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


@cache
def grammar_fields(grammar: str) -> frozenset[str]:
    """A grammar's value rules (`size_a: INT`): every rule but `start` and the templates it lists, less
    those its Transformer declares to build something other than a field mapping (a shape, a list)."""
    source = grammar_source(grammar)
    start = _START.search(source)
    templates = set(re.findall(r"\b[a-z][a-z0-9_]*\b", start.group(1))) if start else set()
    built: set[str] = set()
    for transformer in _transformers(grammar):
        for attr, method in vars(transformer).items():
            returns = inspect.get_annotations(method).get("return") if callable(method) else None
            if returns is not None and not str(returns).startswith(("dict", "Dict", "Fields", "Mapping")):
                built.add(attr)
    aliased = set(_ALIASED.findall(source))  # `first_operand: MAT1 -> operand_a`: its tree is named operand_a
    return frozenset(set(_RULE.findall(source)) - templates - built - aliased - {"start"})


def _transformers(grammar: str) -> list[type[Transformer]]:
    """The lark Transformers of the format that reads `grammar` (in its reader's module), which turn its
    trees into a record's values."""
    return defined_in(folder(grammar).name, Transformer)


@cache
def record_facts() -> dict[str, frozenset[str]]:
    """Each record kind's declared facts."""
    out: dict[str, frozenset[str]] = {}
    for model in _record_kinds():
        kind = model.model_fields["kind"].default if "kind" in model.model_fields else None
        if isinstance(kind, str):
            out[kind] = model.declared_facts()
    return out


def context_facts() -> frozenset[str]:
    """Facts any incident may carry, whatever its rule, and what the traceback that locates it says."""
    return declared_by("live", "match", "caller", "context") | PyException.declared_facts()


def guard_facts() -> frozenset[str]:
    """What `kbdebug.guard()` reports with the error it raises (rules that name `guard_ops`)."""
    return declared_by("guard")


def pattern_groups(data: dict[str, Any]) -> set[str]:
    """The named groups of a rule file's match patterns."""
    names: set[str] = set()
    matches = data.get("match")
    for m in matches if isinstance(matches, list) else []:
        for key in ("fields", "absent"):
            for pattern in (m.get(key) or {}).values() if isinstance(m, dict) and isinstance(m.get(key), dict) else ():
                try:
                    names |= set(re.compile(str(pattern)).groupindex)
                except re.error:
                    continue  # reported by the loader
    return names


def rule_vocabulary(data: dict[str, Any], folds_in: Iterable[str] = ()) -> set[str]:
    """The facts a rule file's guide may use: its matches' record kinds, the kinds of the causes folded
    into it (`folds_in`), the context, guard's facts when it names guard ops, its own facts and groups."""
    per_kind = record_facts()
    matches = data.get("match")
    kinds = {str(m.get("kind")) for m in matches if isinstance(m, dict)} if isinstance(matches, list) else set()
    vocab = set(context_facts())
    for kind in kinds | set(folds_in):
        vocab |= per_kind.get(kind, frozenset())
    if data.get("guard_ops"):
        vocab |= guard_facts()
    own = data.get("facts")
    return vocab | set(own if isinstance(own, dict) else ()) | pattern_groups(data)
