"""Which log lines a diagnosis keeps: those near each incident's records, so a report can show the
evidence in context without holding the whole log."""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.core.frames import frame_needle
from kbdebug.diagnosis import Incident

CONTEXT = 2  # lines kept before and after each record
MAX_SHOWN = 14  # lines of one record shown before the rest is summarised


def lines_near(incidents: list[Incident], lines: Iterable[tuple[int, str]]) -> dict[int, str]:
    """The scanned lines near each incident's records, so renderers can show them in context, and the
    user's own frame (`File "train.py", line 42` and its code line) wherever it is in the log."""
    kept: dict[int, str] = {}
    wanted: set[int] = set()
    frames = {needle for inc in incidents if (needle := frame_needle(inc.facts))}
    for inc in incidents:
        for rec in inc.records:
            last = min(rec.last_line or rec.first_line, rec.first_line + MAX_SHOWN)
            wanted.update(range(rec.first_line - CONTEXT, last + CONTEXT + 1))
            wanted.update(range((rec.last_line or rec.first_line) - CONTEXT, (rec.last_line or rec.first_line) + CONTEXT + 1))
    code_next = False
    for no, text in lines:
        if no in wanted or code_next:
            kept[no] = text
        code_next = False
        if frames and any(needle in text for needle in frames):
            kept[no] = text
            code_next = True  # Python prints the frame's source line under it
    return kept
