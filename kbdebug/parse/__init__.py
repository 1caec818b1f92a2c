"""Turn normalised lines into records: dispatch each line to the grammars that can read it,
then assemble multi-line records (tracebacks, sanitizer reports, C++ error blocks).

`parse_regions()` is the entry point; each format's reader lives in its own module (asserts, tracebacks, cuda, sanitizer,
distributed, messages); `assemble.Assembler` walks the lines.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbdebug.normalise import Line, Region
from kbdebug.parse.assemble import Assembler
from kbdebug.parse.asserts import group_asserts
from kbdebug.records import Frame, Record

__all__ = ["parse_lines", "parse_regions", "parse_text"]


def parse_regions(regions: Iterable[Region]) -> list[Record]:
    records: list[Record] = []
    for region in regions:
        records.extend(parse_lines(region.lines))
    return group_asserts(records)


def parse_lines(lines: list[Line], frames: list[Frame] | None = None) -> list[Record]:
    """The records in a run of lines; `frames` are those of a traceback already read (a live exception's),
    for the exception line that `lines` start with."""
    return Assembler(frames).run(lines)


def parse_text(text: str) -> list[Record]:
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_text

    return parse_regions(scan_text(text, needles))
