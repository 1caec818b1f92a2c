"""Which log lines a diagnosis keeps: those near each incident's records, so a report can show the
evidence in context without holding the whole log."""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.diagnosis import Diagnosis

CONTEXT = 2  # lines kept before and after each record
MAX_SHOWN = 14  # lines of one record shown before the rest is summarised


def keep_context(diag: Diagnosis, lines: Iterable[tuple[int, str]]) -> Diagnosis:
    """Keep the scanned lines near each incident's records, so renderers can show them in context."""
    wanted: set[int] = set()
    for inc in diag.incidents:
        for rec in inc.records:
            last = min(rec.last_line or rec.first_line, rec.first_line + MAX_SHOWN)
            wanted.update(range(rec.first_line - CONTEXT, last + CONTEXT + 1))
            wanted.update(range((rec.last_line or rec.first_line) - CONTEXT, (rec.last_line or rec.first_line) + CONTEXT + 1))
    for no, text in lines:
        if no in wanted:
            diag.lines[no] = text
    return diag
