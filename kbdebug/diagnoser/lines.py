"""Which log lines a diagnosis keeps: those near each incident's records, so a report can show the
evidence in context without holding the whole log."""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.diagnosis import Diagnosis

CONTEXT = 2  # lines kept before and after each record
MAX_SHOWN = 14  # lines of one record shown before the rest is summarised


def keep_context(diag: Diagnosis, lines: Iterable[tuple[int, str]]) -> Diagnosis:
    """Keep the scanned lines near each incident's records, so renderers can show them in context, and the
    user's own frame (`File "train.py", line 42` and its code line) wherever it is in the log."""
    wanted: set[int] = set()
    frames = {needle for inc in diag.incidents if (needle := frame_needle(inc.facts))}
    for inc in diag.incidents:
        for rec in inc.records:
            last = min(rec.last_line or rec.first_line, rec.first_line + MAX_SHOWN)
            wanted.update(range(rec.first_line - CONTEXT, last + CONTEXT + 1))
            wanted.update(range((rec.last_line or rec.first_line) - CONTEXT, (rec.last_line or rec.first_line) + CONTEXT + 1))
    code_next = False
    for no, text in lines:
        if no in wanted or code_next:
            diag.lines[no] = text
        code_next = False
        if frames and any(needle in text for needle in frames):
            diag.lines[no] = text
            code_next = True  # Python prints the frame's source line under it
    return diag


def frame_needle(facts: dict) -> str:
    """How the innermost user frame appears in a traceback: `"PATH", line N`, or a notebook's `Cell In[3], line 2`."""
    frame = facts.get("innermost_user_frame")
    if not isinstance(frame, str) or ":" not in frame:
        return ""
    if frame.startswith("Cell In["):  # IPython 8 prints the cell as we name it
        return frame
    path, _, line = frame.rpartition(":")
    return f'"{path}", line {line}' if line.isdigit() else ""
