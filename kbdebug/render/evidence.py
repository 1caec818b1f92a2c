"""The log lines behind an incident: the decisive line highlighted, a few lines of context, repeats collapsed.

A diagnosis is trusted at a glance when the reader sees the kernel assert or the exception line
itself, with its line number, not a list of numbers. Records keep their own raw text; the lines
around them come from `Diagnosis.lines` (kept where the diagnosis is assembled, see
`keep_context`), so a diagnosis built without them still shows each record's own lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbdebug import _regex_cache
from kbdebug.core.facts import Facts
from kbdebug.core.frames import frame_needle
from kbdebug.core.terminals import EXC_NAME
from kbdebug.diagnoser.lines import CONTEXT, MAX_SHOWN
from kbdebug.diagnosis import Incident

_DIGITS = _regex_cache.compile(r"\d+")
_EXCEPTION_LINE = _regex_cache.compile(rf"\s*{EXC_NAME}.*:")  # `Type: message`, the line that names the error
_BLOCK = _regex_cache.compile(r"block: \[(\d+)")


@dataclass
class EvidenceLine:
    """One row of an evidence block: a numbered log line, or (no=None) a note that lines were collapsed."""

    no: int | None
    text: str
    decisive: bool = False
    highlight: str = ""  # the decisive part of the line; empty: the whole line


def _shape(text: str) -> str:
    return _DIGITS.sub("#", text)


def _decisive_line(kind: str, first: int, last: int, own: dict[int, str]) -> int:
    """The kernel assert's first line, a traceback's closing `Type: message` line, else the first line."""
    if kind == "exception":
        for no in range(last, first - 1, -1):
            if _EXCEPTION_LINE.match(own.get(no, "")):
                return no
        return last
    return first


_HIGHLIGHT_KEYS = ("assertion", "error_message", "cuda_error", "category")  # the root's own words, most specific first


def _highlight(text: str, facts: Facts) -> str:
    for key in _HIGHLIGHT_KEYS:
        val = facts.get(key)
        if isinstance(val, str) and val and val in text:
            return val
    return ""


def _rank(text: str, facts: Facts) -> int:
    """How closely a candidate line is the root's own (lower is closer): a consequence folded into the
    incident (the `device-side assert triggered` after a kernel assert) carries only a later key."""
    hl = _highlight(text, facts)
    return next((k for k, key in enumerate(_HIGHLIGHT_KEYS) if facts.get(key) == hl), len(_HIGHLIGHT_KEYS)) if hl else len(_HIGHLIGHT_KEYS)


def _user_frame_lines(facts: Facts, own: dict[int, str], first: int, last: int) -> set[int]:
    """The `File "...", line N` of the innermost user frame and its code line: the user's own line stays
    among the evidence when a long traceback is cut."""
    needle = frame_needle(facts)
    return {n for no in range(first, last + 1) if needle and needle in own.get(no, "") for n in (no, no + 1)} if needle else set()


def _user_frame_block(facts: Facts, lines: dict[int, str], shown: set[int]) -> list[EvidenceLine]:
    """The user's frame as its own block when no record's block holds it (the record is the message alone)."""
    needle = frame_needle(facts)
    at = next((no for no, text in sorted(lines.items()) if needle and needle in text), None)
    if at is None or at in shown:
        return []
    return [EvidenceLine(no, lines[no]) for no in (at, at + 1) if no in lines]


def _collapse(rows: list[EvidenceLine]) -> list[EvidenceLine]:
    """Runs of lines that differ only in their numbers (one assert per thread) become one note."""
    out: list[EvidenceLine] = []
    i = 0
    while i < len(rows):
        row = rows[i]
        out.append(row)
        j = i + 1
        while j < len(rows) and rows[j].no is not None and _shape(rows[j].text) == _shape(row.text):
            j += 1
        if j - i > 2:
            out.append(rows[i + 1])
            rest = rows[i + 2 : j]
            what = "assert" if "Assertion" in row.text else "similar"
            blocks = [int(m.group(1)) for r in rows[i:j] if (m := _BLOCK.search(r.text))]
            span = f", blocks [{min(blocks)}..{max(blocks)}]" if blocks else ""
            out.append(EvidenceLine(None, f"… {len(rest)} more {what} lines{span}"))
        elif j - i == 2:
            out.append(rows[i + 1])
        i = j
    return out


def evidence(inc: Incident, lines: dict[int, str]) -> list[list[EvidenceLine]]:
    """One block of rows per distinct record, in log order; one decisive line per incident (the root's own)."""
    blocks: list[list[EvidenceLine]] = []
    candidates: list[tuple[int, int, EvidenceLine]] = []
    seen: set[int] = set()
    for rec in sorted(inc.records, key=lambda r: r.first_line):
        if rec.first_line in seen or rec.first_line <= 0:
            continue
        seen.add(rec.first_line)
        first, last = rec.first_line, max(rec.last_line, rec.first_line)
        own = dict(lines)
        if first not in own:  # a record of no kept line (a live exception's): its own text, the log's lines as printed
            for k, text in enumerate(rec.raw.split("\n")):
                own.setdefault(first + k, text)
        decisive = _decisive_line(rec.kind, first, last, own)
        mine = _user_frame_lines(inc.facts, own, first, last)
        rows = [EvidenceLine(no, own[no]) for no in range(first - CONTEXT, first) if no in own]
        body = [EvidenceLine(no, own[no]) for no in range(first, last + 1) if no in own]
        collapsed = _collapse(body)
        if len(collapsed) > MAX_SHOWN:
            keep = [r for r in collapsed[: MAX_SHOWN - 3]]
            kept = [r for r in collapsed if (r.no == decisive or r.no in mine) and r not in keep]
            tail = kept + [r for r in collapsed[-2:] if r not in kept]
            skipped = len(collapsed) - len(keep) - len(tail)
            collapsed = keep + [EvidenceLine(None, f"… {skipped} more lines")] + [r for r in tail if r not in keep]
        rows += collapsed
        rows += [EvidenceLine(no, own[no]) for no in range(last + 1, last + CONTEXT + 1) if no in own]
        for row in rows:
            if row.no == decisive:
                candidates.append((_rank(row.text, inc.facts), len(candidates), row))
        blocks.append(rows)
    frame_block = _user_frame_block(inc.facts, lines, {r.no for b in blocks for r in b if r.no is not None})
    if frame_block:
        blocks.append(frame_block)
        blocks.sort(key=lambda b: next((r.no for r in b if r.no is not None), 0))
    if candidates:
        _, _, row = min(candidates, key=lambda c: (c[0], c[1]))
        row.decisive = True
        row.highlight = _highlight(row.text, inc.facts)
    return _once(blocks)


def _once(blocks: list[list[EvidenceLine]]) -> list[list[EvidenceLine]]:
    """Each log line shown once: records that share lines (a message and the traceback that holds it, a
    preemption's lines around each other's) give blocks that overlap; a line already shown is dropped (its
    decisive mark moves to the copy kept), and blocks that then touch are joined."""
    kept: dict[int, EvidenceLine] = {}
    out: list[list[EvidenceLine]] = []
    for block in blocks:
        rows: list[EvidenceLine] = []
        for row in block:
            if row.no is None:
                if rows and rows[-1].no is not None:  # a note about the lines after a row kept here
                    rows.append(row)
                continue
            first = kept.get(row.no)
            if first is None:
                kept[row.no] = row
                rows.append(row)
            elif row.decisive:
                first.decisive, first.highlight = True, row.highlight
        while rows and rows[-1].no is None and len(rows) == 1:
            rows.pop()
        if not rows:
            continue
        last = next((r.no for r in reversed(out[-1]) if r.no is not None), None) if out else None
        if last is not None and rows[0].no is not None and rows[0].no <= last + 1 and out[-1][-1].no is not None:
            out[-1].extend(rows)
        else:
            out.append(rows)
    return out


def split_highlight(row: EvidenceLine) -> tuple[str, str, str]:
    """(before, decisive part, after) of a row's text, for renderers that mark the part."""
    if not row.decisive:
        return row.text, "", ""
    if not row.highlight:
        return "", row.text, ""
    head, _, tail = row.text.partition(row.highlight)
    return head, row.highlight, tail
