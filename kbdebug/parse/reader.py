"""What a format's reader is to the walk over a region's lines (kbdebug.parse.walk).

A format is a folder `grammars/<format>/` (its grammars and their cases) and a reader,
`kbdebug/parse/readers/<format>.py`, which turns the lines of its grammars into records. Readers share
nothing: each keeps its own state (the record it is extending) and hands what it builds to the walk's
`Sink`. What one format's records say about another's (an index error's op is on the failing source line
of the traceback it was printed in) is drawn afterwards from the records themselves (`link`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from kbdebug.normalise import Line
from kbdebug.records import Frame, Record


class Sink(Protocol):
    """Where a reader hands its records: the walk over the region."""

    def emit(self, record: Record) -> None:
        """A record built from the lines read so far (the reader may keep extending it)."""

    def reread(self, forms: Sequence[Line]) -> None:
        """An error's message read whole (its forms: folded, joined) as a line of the formats that read
        messages, until one form gives a record: a console split it over lines its first line misses."""

    @property
    def empty(self) -> bool:
        """Whether no reader has built any record in the region yet."""

    def holds_message(self, line: Line) -> bool:
        """Whether a format that reads messages would make a record of `line` (asked, not read: nothing is kept)."""


class Reader:
    """One format's reader, made afresh for each region.

    `order`: where it reads each line among the formats (a reader that takes a line as its own, a
    sanitizer report or a kernel assert, reads before the others, which then never see it).
    `reads_messages`: it also reads the message of an exception read whole (`Sink.reread`).
    `ends_messages`: a line it takes as its own ends the message an exception has open (a sanitizer's report
    is a block of its own); else such a line is skipped and the message may go on after it (the device's
    assert flood is printed into the host's output wherever it happens to be).
    """

    order: ClassVar[int] = 100
    reads_messages: ClassVar[bool] = False
    ends_messages: ClassVar[bool] = False  # a line it takes as its own ends an error's message left open

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        """`frames`: a traceback already read (a live exception's), for the readers whose lines are read in
        the context a printed traceback gives them."""
        self.sink = sink

    def read(self, line: Line) -> bool:
        """Read one line; True when it is this format's alone (the readers after this one skip it)."""
        raise NotImplementedError

    def passed(self, line: Line, ends_messages: bool) -> None:
        """An earlier reader took `line` as its own (`ends_messages`: that reader's)."""

    def end(self, lines: Sequence[Line]) -> None:
        """The region (`lines`) is read: emit what is still open."""

    @classmethod
    def link(cls, records: list[Record]) -> None:
        """What this format's records say about the others' of the same region, drawn from the records. The
        formats link last reader first: what a message says of its exception is there when the exceptions link."""

    @classmethod
    def settle(cls, records: list[Record]) -> list[Record]:
        """This format's records over the whole log (every region read): the same records by default."""
        return records


def read_at(line: Line) -> dict[str, Any]:
    """Where a record read off one line comes from: its line number (first and last), text, rank and time."""
    return {"first_line": line.no, "last_line": line.no, "raw": line.text, "rank": line.rank, "time": line.time}


def containing(records: Sequence[Record], kind: str, no: int) -> Record | None:
    """The last record of `kind` whose lines hold line `no` (the exception a message was printed in)."""
    for rec in reversed(records):
        if rec.kind == kind and rec.first_line <= no <= rec.last_line:
            return rec
    return None
