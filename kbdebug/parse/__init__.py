"""Turn normalised lines into records: each line goes to the readers of the formats in `grammars/` (one
folder per format, one reader per folder in `kbdebug/parse/readers/`, paired by kbdebug.parse.registry),
which build records and join multi-line ones (tracebacks, sanitizer reports, C++ error blocks).

`parse_regions()` is the entry point; `kbdebug.parse.walk.Walk` walks a region's lines.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.normalise import Line, Region
from kbdebug.parse.registry import formats
from kbdebug.parse.walk import Walk
from kbdebug.records import Frame, Record

__all__ = ["parse_lines", "parse_regions", "parse_text"]


def parse_regions(regions: Iterable[Region]) -> list[Record]:
    records: list[Record] = []
    for region in regions:
        records.extend(parse_lines(region.lines))
    for fmt in formats():
        records = fmt.reader.settle(records)
    return records


def parse_lines(lines: list[Line], frames: list[Frame] | None = None) -> list[Record]:
    """The records in a run of lines; `frames` are those of a traceback already read (a live exception's),
    for the exception line that `lines` start with."""
    return Walk(frames or ()).run(lines)


def parse_text(text: str) -> list[Record]:
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_text

    return parse_regions(scan_text(text, needles))
