"""Find the few regions of a huge log that can hold crash evidence, reading it as a stream.

Real logs are gigabytes of progress bars with a few kilobytes of evidence. The scanner never
holds the whole input: it reads fixed-size chunks, looks for byte needles (derived from the grammars
by kbdebug.parse.needles and passed in) in one RE2 pass, and keeps only a window of context around
each hit. What comes out is a list of `Region`s, already normalised into `Line`s for the grammars.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Sequence
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from kbdebug.core.phrases import literal_finder

if TYPE_CHECKING:  # the regions are normalised only when a needle was found: a clean log costs no normaliser
    from kbdebug.normalise import Region

Needles = Callable[[], Sequence[bytes]]  # asked for only when needed: deriving them may build every parser

# a read this size is served from memory the allocator keeps; a larger one is mapped afresh and unmapped each time,
# a page fault per 4 KiB read (a fifth of the scan of a log of progress bars)
CHUNK = 1 << 20
BACK = 48 * 1024  # context kept before a hit: a traceback's frames precede its last line
FWD = 16 * 1024  # context after a hit: DSA hints, C++ frames, sanitizer detail lines
MAX_REGION = 4 << 20
HEAD_CAP = 12 << 20  # evidence kept from the start and the end of a pathological log
TAIL_CAP = 12 << 20
LONG_LINE = 1 << 20  # beyond this a "line" is a tqdm stream with only \r redraws: \r counts as a line end
# A hit line met this many times before (its numbers aside) opens no region: a warning printed every step, a
# retried error, a metric named `*_error` say nothing new after their first printings, and each region they
# opened would drag BACK + FWD bytes of progress bars into the parse. Such a line still joins the region it
# directly follows (a device assert flood is one line per thread), and it stays in the context of the
# regions that other hits open (the crash at the end reads the warnings before it).
REPEATS = 4
MAX_KINDS = 1 << 14  # distinct hit lines counted; past this a new one always opens its region (memory stays bounded)
_NUMBERS = re.compile(rb"\d+")
# An input this small is read whole, as one region: a pasted message need not hold any needle
# ("CUDA out of memory. Tried to allocate ..." without its exception type has none).
WHOLE = 1 << 20


class _Raw(NamedTuple):
    """A stretch of the log the scanner keeps, as it was printed."""

    start: int  # absolute byte offset
    data: bytes
    line: int  # 1-based line number of `start`


class Scanner:
    """Incremental region finder: `feed()` bytes as they arrive, `close()` for the regions."""

    def __init__(self, needles: Needles, back: int = BACK, fwd: int = FWD) -> None:
        # what to search for is the grammars' knowledge (kbdebug.parse.needles), passed in by the caller
        # and asked for only once the input outgrows WHOLE: a small input is read whole, never searched
        self._needles = needles
        self.back, self.fwd = back, fwd
        self._buf = b""
        self._base = 0  # absolute offset of _buf[0]
        self._searched = 0  # absolute offset up to which needles were searched
        self._open: list[int] | None = None  # [start, end) of the region being collected, where its first hit line starts
        self._line_pos = 0  # absolute offset whose line number is _line_no
        self._line_no = 1
        self._head: list[_Raw] = []
        self._head_bytes = 0
        self._tail: deque[_Raw] = deque()
        self._tail_bytes = 0
        self._emitted_to = 0  # a new region never re-reads bytes of an emitted one
        self.dropped_bytes = 0
        self.total_bytes = 0
        self._whole: list[bytes] | None = []  # everything fed, while it stays under WHOLE
        self._seen: dict[bytes, int] = {}  # hit lines (numbers masked) -> how often met
        self._exact: set[bytes] = set()  # hit lines known to be repeats, as they were printed
        self.repeats = 0  # hits that opened no region: their line was met REPEATS times before
        self._flood_end = -1  # absolute end of the last hit line taken: a repeat right after it is part of its flood

    @cached_property
    def needles(self) -> tuple[bytes, ...]:
        return tuple(self._needles())

    @cached_property
    def max_needle(self) -> int:
        return max((len(n) for n in self.needles), default=1)

    @cached_property
    def _finder(self) -> Any:
        """All needles in one RE2 automaton: one linear pass over a chunk, not one `find` pass per needle
        (30 needles: ten times faster on a log of progress redraws)."""
        return literal_finder(self.needles) if self.needles else None

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total_bytes += len(data)
        if self._whole is not None:
            if self.total_bytes <= WHOLE:
                self._whole.append(data)
                return
            data, self._whole = b"".join(self._whole) + data, None  # outgrown: searched from its start
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        base = self._base
        # only complete lines are searched, so a needle split over two reads is still found
        cut = buf.rfind(b"\n") + 1
        if len(buf) - cut > LONG_LINE:  # no newline for a long while: end the "line" at a \r, or cut it
            cut = max(cut, buf.rfind(b"\r") + 1)
            if len(buf) - cut > LONG_LINE:
                cut = len(buf) - self.max_needle
        limit = base + cut
        if limit > self._searched:
            self._search(buf, base, self._searched - base, cut)
            self._searched = limit
        if self._open and self._open[1] <= limit:
            self._emit(buf, base)
        keep_from = max(limit - self.back, base)
        if self._open:
            keep_from = min(keep_from, self._open[0])
        keep_from = min(keep_from, limit)
        # keep the buffer starting at a line start, so no region can begin mid-line
        keep_from = base + _line_start(buf, keep_from - base) if keep_from > base else base
        self._count_lines(buf, base, keep_from)
        self._buf = buf[keep_from - base :]
        self._base = keep_from

    @property
    def lines(self) -> int:
        """How many lines were fed so far (their newlines): the scanner counts them anyway, to number its regions."""
        if self._whole is not None:
            return sum(chunk.count(b"\n") for chunk in self._whole)
        return self._line_no - 1 + self._buf.count(b"\n", self._line_pos - self._base)

    def found(self) -> bool:
        """Whether a needle occurs in what was fed so far: whether the output holds a line that can open a record
        (a small input, read whole by `close()`, is searched here). `kbdebug run` diagnoses a job that succeeded
        only then: a clean run's output costs no parser."""
        if self._whole is not None:
            finder = self._finder
            return finder is not None and finder.search(b"".join(self._whole)) is not None
        self._search_rest()
        return bool(self._head or self._tail or self._open)

    def close(self) -> list[Region]:
        from kbdebug.normalise import normalise

        if self._whole is not None:
            return [normalise(b"".join(self._whole))] if self._whole else []
        buf, base = self._buf, self._base
        self._search_rest()
        if self._open:
            self._open[1] = min(self._open[1], base + len(buf))
            self._emit(buf, base)
        raws = self._head + list(self._tail)
        return [normalise(r.data, r.line) for r in raws]

    # -- internals -------------------------------------------------------------------------
    def _search_rest(self) -> None:
        """Search what `feed` left unsearched (the last line, which no newline ended yet)."""
        buf, base = self._buf, self._base
        if self._searched < base + len(buf):
            self._search(buf, base, self._searched - base, len(buf))
            self._searched = base + len(buf)

    def _search(self, buf: bytes, base: int, lo: int, hi: int) -> None:
        # one pass over the chunk, resumed after each hit line (one hit per line is enough): a search call per line
        # costs more than the search itself on a log where every step prints a warning
        first = self._first_needle
        lo = max(lo, 0)
        while lo < hi:
            i = first(buf, lo, hi)[0][0]
            if i < 0:
                return
            # the line's start: past the last \n since the previous hit line (when within LONG_LINE), else _line_start's
            ls = buf.rfind(b"\n", lo - 1 if lo else 0, i) + 1 if i - lo < LONG_LINE else 0
            if not ls:
                ls = _line_start(buf, i)
            nl = buf.find(b"\n", i, hi)
            lo = hi if nl == -1 else nl + 1
            if nl == -1 or nl - i >= LONG_LINE:
                le = buf.find(b"\n", i, i + LONG_LINE)
                if le == -1:
                    le = buf.find(b"\r", i, i + LONG_LINE)
                le = min(len(buf), i + LONG_LINE) if le == -1 else le + 1
            else:
                le = nl + 1
            if self._repeated(buf[ls:le]) and not (self._open and base + ls == self._flood_end):
                continue
            self._flood_end = base + le
            start = max(base + ls - self.back, base, self._emitted_to)
            stop = base + le + self.fwd
            if self._open and start <= self._open[1] and stop - self._open[0] <= MAX_REGION:
                self._open[1] = max(self._open[1], stop)
                continue
            if self._open:
                self._open[1] = min(self._open[1], base + ls)
                self._emit(buf, base)
            self._open = [start, stop, base + ls]

    @cached_property
    def _first_needle(self) -> Callable[[bytes, int, int], Sequence[tuple[int, int]]]:
        """Where the first needle in buf[lo:hi] starts and ends, as [(start, end)], (-1, -1) for none. With
        google-re2, its compiled program's own call: the wrapper builds a match object per hit, as costly as the
        search on a log of warnings; any other finder through its own `search`."""
        finder = self._finder
        program: Any = getattr(finder, "_regexp", None)
        anchor = getattr(getattr(program, "Anchor", None), "UNANCHORED", None)
        if anchor is not None:
            return partial(program.Match, anchor)

        def search(buf: bytes, lo: int, hi: int) -> Sequence[tuple[int, int]]:
            m = finder.search(buf, lo, hi) if finder is not None else None
            return [(-1, -1) if m is None else m.span()]

        return search

    def _repeated(self, line: bytes) -> bool:
        """Whether this hit line was met REPEATS times before (its numbers aside): then it opens no region."""
        head = line[:512]
        if head in self._exact:  # the same bytes again (a warning without a step number): nothing to mask
            self.repeats += 1
            return True
        key = _NUMBERS.sub(b"0", head)
        seen = self._seen.get(key, 0)
        if seen >= REPEATS:
            self.repeats += 1
            if len(self._exact) < MAX_KINDS // 4:
                self._exact.add(head)
            return True
        if seen or len(self._seen) < MAX_KINDS:
            self._seen[key] = seen + 1
        return False

    def _emit(self, buf: bytes, base: int) -> None:
        assert self._open is not None
        start, stop, hit = self._open
        self._open = None
        start = max(start, base)
        stop = min(stop, base + len(buf))
        if stop <= start:
            return
        # align to line starts so no region begins mid-line, nor past the line of the hit that opened it (in a line
        # of megabytes of \r redraws the next \n comes after that hit, which is the last \r segment)
        rel = start - base
        if rel > 0 and buf[rel - 1 : rel] not in (b"\n", b"\r"):
            nl = buf.find(b"\n", rel, stop - base)
            if nl == -1 or nl - rel > LONG_LINE:
                cr = buf.find(b"\r", rel, stop - base)
                nl = cr if cr != -1 else (nl if nl != -1 else rel - 1)
            rel = min(nl + 1, hit - base)
        data = buf[rel : stop - base]
        if not data:
            return
        self._count_lines(buf, base, base + rel)
        raw = _Raw(base + rel, data, self._line_no)
        self._emitted_to = stop
        self._store(raw)

    def _count_lines(self, buf: bytes, base: int, upto: int) -> None:
        if upto > self._line_pos:
            self._line_no += buf.count(b"\n", self._line_pos - base, upto - base)
            self._line_pos = upto

    def _store(self, raw: _Raw) -> None:
        if self._head_bytes < HEAD_CAP:
            self._head.append(raw)
            self._head_bytes += len(raw.data)
            return
        self._tail.append(raw)
        self._tail_bytes += len(raw.data)
        while self._tail_bytes > TAIL_CAP and len(self._tail) > 1:
            old = self._tail.popleft()
            self._tail_bytes -= len(old.data)
            self.dropped_bytes += len(old.data)


def _line_start(buf: bytes, pos: int) -> int:
    """Start of the line holding buf[pos]: after the last \n, or after the last \r when the line
    is a megabyte-long run of progress redraws, or pos itself in a line with neither."""
    nl = buf.rfind(b"\n", max(0, pos - LONG_LINE), pos) + 1
    if nl:
        return nl
    if pos <= LONG_LINE:
        return 0
    cr = buf.rfind(b"\r", pos - LONG_LINE, pos) + 1
    return cr if cr else pos


def scan_stream(stream: BinaryIO, needles: Needles, chunk: int = CHUNK) -> list[Region]:
    scanner = Scanner(needles)
    while True:
        data = stream.read(chunk)
        if not data:
            break
        scanner.feed(data)
    return scanner.close()


def scan_path(path: str | os.PathLike[str], needles: Needles, chunk: int = CHUNK) -> list[Region]:
    """Scan a file by name, streamed like any other input."""
    with open(path, "rb") as fh:
        return scan_stream(fh, needles, chunk)


def scan_bytes(data: bytes, needles: Needles) -> list[Region]:
    scanner = Scanner(needles)
    for i in range(0, len(data), CHUNK):
        scanner.feed(data[i : i + CHUNK])
    return scanner.close()


def scan_text(text: str, needles: Needles) -> list[Region]:
    return scan_bytes(text.encode("utf-8", "surrogatepass"), needles)
