"""The line-by-line walk of a region: each line goes to every format's reader in turn, until one takes it
as its own; readers hand their records to the walk, which keeps them in the order they were built."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from kbdebug.normalise import Line
from kbdebug.parse.derive import own_lines
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader
from kbdebug.parse.registry import formats
from kbdebug.records import Frame, Record

KNOWN_WINDOW = 8  # records a reread looks back over for a reading of the same line


class Walk:
    """Walks the lines of a region once; the readers' Sink."""

    def __init__(self, frames: Sequence[Frame] = ()) -> None:
        self.out: list[Record] = []
        self._at: int | None = None  # where records go while the readers that a line passed close what it ended
        self.readers: list[Reader] = [f.reader(self, frames) for f in formats()]

    # -- Sink ------------------------------------------------------------------------------------
    def emit(self, record: Record) -> None:
        if self._at is None:
            self.out.append(record)
        else:
            self.out.insert(self._at, record)
            self._at += 1

    @property
    def empty(self) -> bool:
        return not self.out

    def holds_message(self, line: Line) -> bool:
        scratch = _Scratch()
        for fmt in formats():
            if fmt.reader.reads_messages:
                fmt.reader(scratch).read(line)
        return bool(scratch.out)

    def reread(self, forms: Sequence[Line]) -> None:
        """Each form in turn, to the readers that read messages; the first form that gives a record ends it.
        A record of the same kind already read off that line (from the message's first line) stays unless
        the whole message's reading says more."""
        known = {(r.kind, r.first_line) for r in self.out[-KNOWN_WINDOW:]}
        for line in forms:
            before = len(self.out)
            for reader in self.readers:
                if not reader.reads_messages:
                    continue
                at = len(self.out)
                reader.read(line)
                if self._keep_fuller(at, known):
                    return
            if len(self.out) > before:
                return

    def _keep_fuller(self, at: int, known: set[tuple[str, int]]) -> bool:
        """Of the records just read (from `at` on), each that a record already there reads off the same
        line: the one with more fields stays, in the earlier one's place. True when a new one replaced it."""
        replaced = False
        for rec in list(self.out[at:]):
            if (rec.kind, rec.first_line) not in known:
                continue
            first = next(i for i, r in enumerate(self.out) if r.kind == rec.kind and r.first_line == rec.first_line)
            self.out.remove(rec)
            if _said(rec) > _said(self.out[first]):
                self.out[first] = rec
                replaced = True
        return replaced

    # -- the walk --------------------------------------------------------------------------------
    def run(self, lines: Sequence[Line]) -> list[Record]:
        for line in (piece for whole in lines for piece in unglue(whole)):
            self.line(line)
        for reader in self.readers:
            reader.end(lines)
        for fmt in reversed(formats()):
            fmt.reader.link(self.out)
        return self.out

    def line(self, line: Line) -> None:
        for k, reader in enumerate(self.readers):
            at = len(self.out)
            if reader.read(line):
                self._at = at  # what the line ended comes before what it began
                try:
                    for other in self.readers[k + 1 :]:
                        other.passed(line, reader.ends_messages)
                finally:
                    self._at = None
                return


class _Scratch:
    """A sink that keeps what it is handed and answers nothing: for asking a reader what it would make of a line."""

    def __init__(self) -> None:
        self.out: list[Record] = []

    def emit(self, record: Record) -> None:
        self.out.append(record)

    def reread(self, forms: Sequence[Line]) -> None:
        pass

    @property
    def empty(self) -> bool:
        return not self.out

    def holds_message(self, line: Line) -> bool:
        return False


def _said(rec: Record) -> int:
    return len(rec.model_dump(exclude_none=True))


def unglue(line: Line) -> list[Line]:
    """A line holding the start of a line kind that tools print on a line of its own (`terminate called
    after ...`, `what():`, a `Traceback` header) after other text: a paste lost its newlines, so it is
    read as the lines it was. Where those kinds start is each grammar's (`// own line:`)."""
    text = line.text
    cuts: set[int] = set()
    for g, a in own_lines():
        found = [k for k in a.starts(text, 8) if k > 0 and not text[:k].isspace()]
        if found and parse(g, text) is None:  # `Original Traceback (...)` is one line of its own kind, not two
            cuts.update(found)
    if not cuts:
        return [line]
    bounds = [0, *sorted(cuts), len(text)]
    return [line._replace(text=text[a:b].rstrip()) for a, b in itertools.pairwise(bounds) if text[a:b].strip()]
