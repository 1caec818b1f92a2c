"""What a rule's command needs to be of any help, by the tool it runs: `CUDA_LAUNCH_BLOCKING=1` does nothing
for an error raised on the CPU nor when launches were already synchronous, a shell command nothing in a
notebook. The guide stage keeps the commands that help (kbdebug.diagnoser.guides.applicable); the context
stage asks whether a rule's CUDA form would have left GPU evidence (`needs_cuda`)."""

from __future__ import annotations

import re

from kbdebug import _regex_cache
from kbdebug.kb.model import Rule

NEEDS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (_regex_cache.compile(r"\bCUDA_LAUNCH_BLOCKING=1\b"), frozenset({"cuda", "not_blocking"})),
    (_regex_cache.compile(r"\bkbdebug run --rerun\b"), frozenset({"cuda", "not_blocking", "shell"})),
    (_regex_cache.compile(r"\bcompute-sanitizer\b"), frozenset({"cuda", "shell"})),
    (_regex_cache.compile(r"(?:^|\s)python\s"), frozenset({"shell"})),
)


def needs(command: str) -> frozenset[str]:
    """What a command needs to be of any help (see NEEDS)."""
    return frozenset().union(*(n for rx, n in NEEDS if rx.search(command)))


def needs_cuda(rule: Rule) -> bool:
    """Whether the rule offers commands that need CUDA: its CUDA form is device-side (a kernel assert, a CUDA error)."""
    return any("cuda" in needs(c) for c in rule.commands)
