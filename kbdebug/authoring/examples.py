"""Run a rule's own examples: positives must be diagnosed with the rule as the root incident, negatives must not.

One function that the tests and `kbdebug rules lint` both call, for bundled and user rules alike, so a
rule's contract is checked the same way wherever the rule lives.
"""

from __future__ import annotations

from pathlib import Path

from kbdebug.kb.layout import LayoutError
from kbdebug.kb.model import Rule

_SHOWN = 100


def _label(snippet: str) -> str:
    """The snippet's last non-blank line (usually the error), shortened: enough to find it in the rule file."""
    line = next((ln.strip() for ln in reversed(snippet.splitlines()) if ln.strip()), "")
    return line if len(line) <= _SHOWN else line[: _SHOWN - 3] + "..."


def root_rule_of(snippet: str, kb_dirs: list[Path] | None = None) -> str | None:
    """The rule id of the root incident kbdebug reports for `snippet`, or None when nothing is found."""
    from kbdebug.api import diagnose_text  # lazy: api imports the knowledge base, not the other way round

    root = diagnose_text(snippet, source="<example>", kb_dirs=kb_dirs).root
    return root.rule if root is not None else None


def check_example(rule: Rule, snippet: str, positive: bool, kb_dirs: list[Path] | None = None, index: int = 1) -> str | None:
    """One problem line when the snippet is not diagnosed as the rule says, else None.

    `index` is the example's 1-based place in its list, so the line says which one to look at.
    """
    got = root_rule_of(snippet, kb_dirs)
    kind = "positive" if positive else "negative"
    if (got != rule.id) if positive else (got == rule.id):
        return f"{rule.id}: {kind} example {index} ({_label(snippet)!r}) is diagnosed as {got or 'nothing'}"
    return None


def check_examples(rule: Rule, kb_dirs: list[Path] | None = None) -> list[str]:
    """One problem line per failing example of `rule`, diagnosed with the bundled rules plus `kb_dirs`.

    `kb_dirs` are the user rule directories the rule was loaded with, so that a user rule is checked
    against the knowledge base it will actually run in.
    """
    try:
        examples = rule.examples
    except LayoutError as exc:  # an example file that cannot be read is the problem to report
        return [str(exc)]
    problems = [check_example(rule, s, True, kb_dirs, i) for i, s in enumerate(examples.positive, 1)]
    problems += [check_example(rule, s, False, kb_dirs, i) for i, s in enumerate(examples.negative, 1)]
    return [p for p in problems if p is not None]
