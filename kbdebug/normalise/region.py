"""A log's lines as the grammars read them (`Line`) and the stretch of the log they came from (`Region`, which can
quote the log's own bytes back): the data the rest of kbdebug.normalise produces."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from kbdebug.core.lazy import lazy
from kbdebug.core.stamps import Stamp

MAX_LINE = 8192
MAX_FLAT = 32 * MAX_LINE  # a log whose newlines were lost is one line: it is split before lines are cut to MAX_LINE


class Line(NamedTuple):
    no: int
    text: str
    rank: int | None = None
    time: Stamp | None = None  # the time its prefix (or its c10/glog bracket) printed: which rank failed first


@dataclass
class Region:
    """A kept stretch of the log: its `lines` as the grammars read them, and its bytes as the log printed them
    (`source`, the very bytes the scanner kept: no copy), so a record can quote the log itself (`original`)."""

    first_line: int
    lines: list[Line] = field(default_factory=list)
    source: bytes = b""
    ends: dict[int, int] = field(default_factory=dict)  # a line re-joined from a hard wrap -> the physical line it ends on

    def original(self, first: int, last: int) -> str | None:
        """The log's own text of physical lines `first`..`last` (and the rest of a wrapped `last`), joined by newlines,
        as printed: prefixes, ANSI escapes, a CRLF line's carriage return and all (only a line over MAX_FLAT characters
        is cut, as `cut` cuts it). None when the region does not hold them."""
        last = max(last, self.ends.get(last, last))
        starts = self._starts
        lo, hi = first - self.first_line, last - self.first_line + 1
        if lo < 0 or hi <= lo or lo >= len(starts):
            return None
        end = starts[hi] - 1 if hi < len(starts) else len(self.source)
        text = self.source[starts[lo] : end].decode("utf-8", "replace")
        if end - starts[lo] <= MAX_FLAT:
            return text
        # a line of megabytes (progress redraws that never end a line) keeps its head and tail, as the grammars read
        # it: a record's quote stays as bounded as its text
        return "\n".join(cut(line, MAX_FLAT) for line in text.split("\n"))

    @cached_property
    def _starts(self) -> array[int]:
        """Where each physical line starts in `source`: built once, when a record first quotes the region."""
        return array("q", [0, *(m.end() for m in _NEWLINE.finditer(self.source))])


_NEWLINE = lazy(rb"\n")


def cut(seg: str, limit: int) -> str:
    """A line longer than `limit` keeps its head and its tail (where an error usually is) around a mark."""
    if len(seg) <= limit:
        return seg
    half = limit // 2
    return f"{seg[:half]} …[{len(seg) - 2 * half} characters cut]… {seg[-half:]}"


def iter_lines(regions: Iterable[Region]) -> Iterator[Line]:
    for region in regions:
        yield from region.lines
