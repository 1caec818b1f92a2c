"""A log's regions read into records: the parse layer's entry points (`parse_regions`, `parse_lines`, `parse_text`)."""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.normalise import Line, Region
from kbdebug.parse.registry import formats
from kbdebug.parse.walk import Walk
from kbdebug.records import Frame, Record


def parse_regions(regions: Iterable[Region]) -> list[Record]:
    """Each region's records, settled over the whole log; each record's `raw` then is the log's own text of the
    lines it was read from (the readers read the normalised lines: a rank prefix gone, a wrap re-joined)."""
    records: list[Record] = []
    quoted: dict[tuple[str, int, str], tuple[Region, int]] = {}
    for region in regions:
        found = parse_lines(region.lines)
        for rec in found:
            # the lines a record was read from, before settling widens its span (an assert flood's count)
            key = (rec.kind, rec.first_line, rec.raw)
            last = max(rec.last_line, quoted[key][1]) if key in quoted else rec.last_line
            quoted[key] = (region, last)
        records.extend(found)
    for fmt in formats():
        records = fmt.reader.settle(records)
    for rec in records:
        where = quoted.get((rec.kind, rec.first_line, rec.raw))
        text = where[0].original(rec.first_line, where[1]) if where is not None else None
        if text is not None:
            rec.raw = text
    return records


def parse_lines(lines: list[Line], frames: list[Frame] | None = None) -> list[Record]:
    """The records in a run of lines; `frames` are those of a traceback already read (a live exception's),
    for the exception line that `lines` start with."""
    return Walk(frames or ()).run(lines)


def parse_text(text: str) -> list[Record]:
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_text

    return parse_regions(scan_text(text, needles))
