"""Find the few regions of a huge log that can hold crash evidence, reading it as a stream.

Real logs are gigabytes of progress bars with a few kilobytes of evidence. The scanner never
holds the whole input: it reads fixed-size chunks, looks for byte needles (derived from the grammars
by kbdebug.parse.needles and passed in) in one RE2 pass, and keeps only a window of context around
each hit. What comes out is a list of `Region`s, already normalised into `Line`s for the grammars.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import Any, BinaryIO

from kbdebug.core.phrases import literal_finder
from kbdebug.normalise import Region, _Raw, normalise

Needles = Callable[[], Sequence[bytes]]  # asked for only when needed: deriving them may build every parser

CHUNK = 1 << 23
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
        self._open: list[int] | None = None  # [start, end) of the region being collected
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

    def skip_to(self, offset: int, line_no: int) -> None:
        """Jump ahead to `offset` (a line start whose number is `line_no`): the bytes in between are
        known to hold no needle, so they are neither read nor searched."""
        if self._whole is not None:  # not one contiguous input: what was held is searched like the rest
            held, self._whole = b"".join(self._whole), None
            self._feed(held)
        end = self._base + len(self._buf)
        if offset <= end:
            return
        if self._searched < end:
            self._search(self._buf, self._base, self._searched - self._base, len(self._buf))
        if self._open:
            self._open[1] = min(self._open[1], end)
            self._emit(self._buf, self._base)
        self.total_bytes += offset - end
        self._whole = None
        self._buf = b""
        self._base = self._searched = self._line_pos = offset
        self._line_no = line_no
        self._emitted_to = max(self._emitted_to, offset)

    def close(self) -> list[Region]:
        if self._whole is not None:
            return [normalise(_Raw(0, b"".join(self._whole), 1))] if self._whole else []
        buf, base = self._buf, self._base
        if self._searched < base + len(buf):
            self._search(buf, base, self._searched - base, len(buf))
            self._searched = base + len(buf)
        if self._open:
            self._open[1] = min(self._open[1], base + len(buf))
            self._emit(buf, base)
        raws = self._head + list(self._tail)
        return [normalise(r) for r in raws]

    # -- internals -------------------------------------------------------------------------
    def _search(self, buf: bytes, base: int, lo: int, hi: int) -> None:
        lo = max(lo, 0)
        hits: list[tuple[int, int]] = []  # (where a needle is, the end of its line or -1)
        line_end = -1
        # one pass over the chunk (a search call per line costs more than the search itself on a log where every
        # step prints a warning); one hit per line is enough
        for i in self._starts(buf, lo, hi):
            if i < line_end:
                continue
            line_end = buf.find(b"\n", i, hi)
            hits.append((i, line_end))
            if line_end == -1:
                break
        for i, nl in hits:
            ls = _line_start(buf, i)
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
            self._open = [start, stop]

    def _starts(self, buf: bytes, lo: int, hi: int) -> Iterator[int]:
        """Where a needle starts in buf[lo:hi], in order. With google-re2, straight from its compiled program:
        the wrapper builds a match object per hit, as costly as the search on a log of warnings; any other
        finder through its own `finditer`."""
        finder = self._finder
        if finder is None:
            return
        program: Any = getattr(finder, "_regexp", None)
        anchor = getattr(getattr(program, "Anchor", None), "UNANCHORED", None)
        if program is None or anchor is None:
            yield from (m.start() for m in finder.finditer(buf, lo, hi))
            return
        while lo < hi:
            start, end = program.Match(anchor, buf, lo, hi)[0]
            if start < 0:
                return
            yield start
            lo = max(end, start + 1)

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
        start, stop = self._open
        self._open = None
        start = max(start, base)
        stop = min(stop, base + len(buf))
        if stop <= start:
            return
        # align to line starts so no region begins mid-line
        rel = start - base
        if rel > 0 and buf[rel - 1 : rel] not in (b"\n", b"\r"):
            nl = buf.find(b"\n", rel, stop - base)
            if nl == -1 or nl - rel > LONG_LINE:
                cr = buf.find(b"\r", rel, stop - base)
                nl = cr if cr != -1 else (nl if nl != -1 else rel - 1)
            rel = nl + 1
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


# Regular files this big are prefiltered with grep, which runs while kbdebug imports and reads faster
# than Python; the bytes between hits are then skipped, not read.
GREP_MIN = 32 << 20
MAX_GREP_HITS = 500_000
# Hits this dense (one per DENSE_BYTES on average, once DENSE_MIN are in) cover the file: a warning every step.
# The scanner then reads it all anyway, and grep's output would cost more than it saves.
DENSE_MIN = 10_000
DENSE_BYTES = 4096


def start_grep(path: str | os.PathLike[str], needles: Needles) -> subprocess.Popen[bytes] | None:
    """Start grep on a large regular file, so it runs while the rest of kbdebug is imported; None
    when the file is small, not a regular file, grep is missing or KBDEBUG_NO_GREP is set."""
    if os.environ.get("KBDEBUG_NO_GREP"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size < GREP_MIN:
        return None
    exe = shutil.which("grep")
    if exe is None:
        return None
    cmd = [exe, "-a", "-b", "-n", "-o", "-F"]
    for needle in needles():
        cmd += ["-e", needle.decode()]
    try:
        return subprocess.Popen(
            [*cmd, "--", os.fspath(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LC_ALL": "C"},
            preexec_fn=_bound_grep_memory if os.name == "posix" else None,
        )
    except OSError:
        return None


GREP_MEMORY = 96 << 20


def _bound_grep_memory() -> None:
    """grep holds its longest line in memory: a log of `\r` progress redraws that never ends a line would
    cost gigabytes. Capped, grep fails on such a file, and the bounded streaming scanner reads it instead."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (GREP_MEMORY, GREP_MEMORY))


def collect_hits(proc: subprocess.Popen[bytes]) -> list[tuple[int, int]] | None:
    """(line number, byte offset) of the first needle on each matching line, or None if grep failed."""
    assert proc.stdout is not None
    hits: list[tuple[int, int]] = []
    last_line = -1
    try:
        for out in proc.stdout:
            no, _, rest = out.partition(b":")
            off, _, _ = rest.partition(b":")
            try:
                line = int(no)
                if line != last_line:  # one hit per line is enough
                    hits.append((line, int(off)))
                    last_line = line
            except ValueError:
                proc.kill()
                return None
            if len(hits) > MAX_GREP_HITS or (len(hits) >= DENSE_MIN and hits[-1][1] < len(hits) * DENSE_BYTES):
                proc.kill()  # evidence everywhere: plain streaming is as fast
                return None
    finally:
        proc.stdout.close()
        rc = proc.wait()
    return hits if rc in (0, 1) else None


def grep_hits(path: str | os.PathLike[str], needles: Needles) -> list[tuple[int, int]] | None:
    proc = start_grep(path, needles)
    return collect_hits(proc) if proc is not None else None


def scan_path(
    path: str | os.PathLike[str], needles: Needles, chunk: int = CHUNK, grep: subprocess.Popen[bytes] | None = None
) -> list[Region]:
    """Scan a file by name: grep-prefiltered when it is a large regular file (pass a `start_grep`
    job to overlap the two), else streamed."""
    with open(path, "rb") as fh:
        if grep is None:
            grep = start_grep(path, needles)
        hits = collect_hits(grep) if grep is not None else None
        if hits is None:
            return scan_stream(fh, needles, chunk)
        return _scan_hits(fh, os.fstat(fh.fileno()).st_size, hits, needles, chunk)


def _scan_hits(fh: BinaryIO, size: int, hits: list[tuple[int, int]], needles: Needles, chunk: int) -> list[Region]:
    scanner = Scanner(needles)
    margin = BACK + LONG_LINE
    i = 0
    while i < len(hits):
        line, off = hits[i]
        # the cluster of hits whose windows touch; read it as one stretch
        j = i
        while j + 1 < len(hits) and hits[j + 1][1] - hits[j][1] <= 2 * margin + FWD:
            j += 1
        lo = max(0, off - margin, scanner._base + len(scanner._buf))
        hi = min(size, hits[j][1] + FWD + LONG_LINE)
        fh.seek(lo)
        head = fh.read(min(off, hi) - lo)
        start = lo
        if lo > 0 and lo > scanner._base + len(scanner._buf):
            nl = head.find(b"\n")
            if nl != -1:
                start = lo + nl + 1
                scanner.skip_to(start, line - head.count(b"\n", nl + 1))
            else:
                scanner.skip_to(lo, line)  # the hit's own line started before the window: a long line
        scanner.feed(head[start - lo :])
        pos = lo + len(head)
        while pos < hi:
            data = fh.read(min(chunk, hi - pos))
            if not data:
                break
            scanner.feed(data)
            pos += len(data)
        i = j + 1
    scanner.total_bytes = size
    return scanner.close()


def scan_bytes(data: bytes, needles: Needles) -> list[Region]:
    scanner = Scanner(needles)
    for i in range(0, len(data), CHUNK):
        scanner.feed(data[i : i + CHUNK])
    return scanner.close()


def scan_text(text: str, needles: Needles) -> list[Region]:
    return scan_bytes(text.encode("utf-8", "surrogatepass"), needles)
