"""Find the few regions of a huge log that can hold crash evidence, reading it as a stream.

Real logs are gigabytes of progress bars with a few kilobytes of evidence. The scanner never
holds the whole input: it reads fixed-size chunks, looks for a handful of byte needles with
`bytes.find` (C speed), and keeps only a window of context around each hit. What comes out
is a list of `Region`s, already normalised into `Line`s for the grammars.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, NamedTuple

# Every evidence type contains at least one of these (see tests/test_scan.py): exception and
# CUDA/cuBLAS/cuDNN error lines ("rror"), kernel asserts ("ssert"), sanitizer lines ("====="),
# UserWarnings ("Warn") and NCCL watchdog lines ("NCCL").
NEEDLES: tuple[bytes, ...] = (b"rror", b"ssert", b"=====", b"Warn", b"NCCL")
CHUNK = 1 << 23
BACK = 48 * 1024  # context kept before a hit: a traceback's frames precede its last line
FWD = 16 * 1024  # context after a hit: DSA hints, C++ frames, sanitizer detail lines
MAX_REGION = 4 << 20
HEAD_CAP = 12 << 20  # evidence kept from the start and the end of a pathological log
TAIL_CAP = 12 << 20
MAX_LINE = 8192
MAX_FLAT = 32 * MAX_LINE  # a log whose newlines were lost is one line: it is split before lines are cut to MAX_LINE
LONG_LINE = 1 << 20  # beyond this a "line" is a tqdm stream with only \r redraws: \r counts as a line end
# An input this small is read whole, as one region: a pasted message need not hold any needle
# ("CUDA out of memory. Tried to allocate ..." without its exception type has none).
WHOLE = 1 << 20


class Line(NamedTuple):
    no: int
    text: str
    rank: int | None = None


@dataclass
class Region:
    first_line: int
    lines: list[Line] = field(default_factory=list)


@dataclass
class _Raw:
    start: int  # absolute byte offset
    data: bytes
    line: int  # 1-based line number of `start`


class Scanner:
    """Incremental region finder: `feed()` bytes as they arrive, `close()` for the regions."""

    def __init__(self, back: int = BACK, fwd: int = FWD) -> None:
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

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total_bytes += len(data)
        if self._whole is not None:
            self._whole.append(data) if self.total_bytes <= WHOLE else setattr(self, "_whole", None)
        buf = self._buf + data if self._buf else data
        base = self._base
        # only complete lines are searched, so a needle split over two reads is still found
        cut = buf.rfind(b"\n") + 1
        if len(buf) - cut > LONG_LINE:  # no newline for a long while: end the "line" at a \r, or cut it
            cut = max(cut, buf.rfind(b"\r") + 1)
            if len(buf) - cut > LONG_LINE:
                cut = len(buf) - MAX_NEEDLE
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
            return [_normalise(_Raw(0, b"".join(self._whole), 1))] if self._whole else []
        buf, base = self._buf, self._base
        if self._searched < base + len(buf):
            self._search(buf, base, self._searched - base, len(buf))
            self._searched = base + len(buf)
        if self._open:
            self._open[1] = min(self._open[1], base + len(buf))
            self._emit(buf, base)
        raws = self._head + list(self._tail)
        return [_normalise(r) for r in raws]

    # -- internals -------------------------------------------------------------------------
    def _search(self, buf: bytes, base: int, lo: int, hi: int) -> None:
        lo = max(lo, 0)
        hits: list[int] = []
        for needle in NEEDLES:
            i = buf.find(needle, lo, hi)
            while i != -1:
                hits.append(i)
                # skip the rest of the line: one hit per line is enough
                nl = buf.find(b"\n", i, hi)
                if nl == -1:
                    break
                i = buf.find(needle, nl, hi)
        if not hits:
            return
        hits.sort()
        for i in hits:
            ls = _line_start(buf, i)
            le = buf.find(b"\n", i, i + LONG_LINE)
            if le == -1:
                le = buf.find(b"\r", i, i + LONG_LINE)
            le = min(len(buf), i + LONG_LINE) if le == -1 else le + 1
            start = max(base + ls - self.back, base, self._emitted_to)
            stop = base + le + self.fwd
            if self._open and start <= self._open[1] and stop - self._open[0] <= MAX_REGION:
                self._open[1] = max(self._open[1], stop)
                continue
            if self._open:
                self._open[1] = min(self._open[1], base + ls)
                self._emit(buf, base)
            self._open = [start, stop]

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


MAX_NEEDLE = max(len(n) for n in NEEDLES)


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


def scan_stream(stream: BinaryIO, chunk: int = CHUNK) -> list[Region]:
    scanner = Scanner()
    while True:
        data = stream.read(chunk)
        if not data:
            break
        scanner.feed(data)
    return scanner.close()


# Regular files this big are prefiltered with grep, which finds the needles several times faster than
# five bytes.find passes; the bytes between hits are then skipped, not read.
GREP_MIN = 32 << 20
MAX_GREP_HITS = 500_000


def start_grep(path: str | os.PathLike[str]) -> subprocess.Popen[bytes] | None:
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
    for needle in NEEDLES:
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
            if len(hits) > MAX_GREP_HITS:  # evidence everywhere: plain streaming is as fast
                proc.kill()
                return None
    finally:
        proc.stdout.close()
        rc = proc.wait()
    return hits if rc in (0, 1) else None


def grep_hits(path: str | os.PathLike[str]) -> list[tuple[int, int]] | None:
    proc = start_grep(path)
    return collect_hits(proc) if proc is not None else None


def scan_path(path: str | os.PathLike[str], chunk: int = CHUNK, grep: subprocess.Popen[bytes] | None = None) -> list[Region]:
    """Scan a file by name: grep-prefiltered when it is a large regular file (pass a `start_grep`
    job to overlap the two), else streamed."""
    with open(path, "rb") as fh:
        if grep is None:
            grep = start_grep(path)
        hits = collect_hits(grep) if grep is not None else None
        if hits is None:
            return scan_stream(fh, chunk)
        return _scan_hits(fh, os.fstat(fh.fileno()).st_size, hits, chunk)


def _scan_hits(fh: BinaryIO, size: int, hits: list[tuple[int, int]], chunk: int) -> list[Region]:
    scanner = Scanner()
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


def scan_bytes(data: bytes) -> list[Region]:
    scanner = Scanner()
    for i in range(0, len(data), CHUNK):
        scanner.feed(data[i : i + CHUNK])
    return scanner.close()


def scan_text(text: str) -> list[Region]:
    return scan_bytes(text.encode("utf-8", "surrogatepass"))


# -- normalisation ---------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PREFIXES = [
    # (pattern, group holding a rank or None)
    (re.compile(r"^\[rank(\d+)\]:\s?"), 1),
    (re.compile(r"^\[default(\d+)\]:\s?"), 1),
    (re.compile(r"^\((?:RayWorker|RayWorkerWrapper|[A-Za-z_]+)?(?: rank=(\d+))? ?pid=\d+(?:, ip=[\d.]+)?\)\s"), 1),
    # systemd's journal: `Oct 04 15:02:41 host unit[394]: `
    (re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: "), None),
    # glog / vLLM style: `ERROR 03-19 07:27:53 [file.py:375] `
    (re.compile(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]\s]+\] "), None),
    # a notebook's or a chat's `Error: ` before the exception line itself
    (re.compile(r"^(?:Error|ERROR|Exception)\s*:\s+(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):)"), None),
    (re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s*(?:\|\s*)?"), None),
    (re.compile(r"^\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?[^\]]*\]\s*"), None),
    (re.compile(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\s*\|(?:[^|\n]*\|)+[^|:\n]*?:\s+"), None),
    (re.compile(r"^\[?(?:INFO|WARNING|DEBUG|CRITICAL|FATAL)\]?(?::|\s+-)\s+"), None),
    # Python logging's `%(asctime)s - %(name)s - %(levelname)s - ` once the time is gone
    (re.compile(r"^-\s+(?:[\w.]+\s+-\s+)?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\s+- ?"), None),
    (re.compile(r"^(\d{1,4}): (?=\s*\S)"), 1),
    (re.compile(r"^>\s?"), None),
]
_GLUE = re.compile(
    r"(?<=\S)(?=Traceback \(most recent call last\):)"
    r"|(?<=[^=\s])\s*(?==========(?:\s|$))"
    r"|(?<=` failed\.)(?=\S)"
    r"|(?<=\S)(?=\[E(?:\d{3,4} [\d:.]+)? ProcessGroupNCCL)"
    r"|(?<=\S)(?=\[rank\d+\]:)"
    r"|(?<=\. )(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): |(?:CUDA|HIP) error: )"  # a sentence that starts a new error
)
_BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
_RECORD_START = re.compile(
    r"^\s*(?:=========|Traceback|File \"|\[rank|frame #|<ipython-input|Cell In\[|-*>"
    r"|\w+(?:\.\w+)*(?:Error|Exception|Warning):)|.*Traceback \(most recent call last\)"
)
_RULE_LINE = re.compile(r"^[-=_*#~\s]+$")


# Translated pages and CJK input methods print ASCII punctuation in its full-width form: fold the whole
# full-width ASCII block (U+FF01-U+FF5E) and the ideographic space back, so `RuntimeError：CUDA error：`
# reads as it was printed.
_FULLWIDTH = {0xFF01 + i: 0x21 + i for i in range(94)} | {0x3000: 0x20}
_FRAME_AT = re.compile(r'File "[^"\n]*", line \d+(?:, in [^\s(]+)?')
_EXC_AT = re.compile(r"(?<=\s)(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):\s)")


def _unflatten(seg: str) -> list[str]:
    """A traceback whose newlines were lost (a Markdown paragraph, a chat paste) back into its lines:
    each frame, the source line after it, and the exception line after the last one."""
    frames = list(_FRAME_AT.finditer(seg))
    if not frames or (len(frames) == 1 and frames[0].start() == len(seg) - len(seg.lstrip())):
        return [seg]
    out = [seg[: frames[0].start()]]
    for i, m in enumerate(frames):
        out.append(m.group(0))
        tail = seg[m.end() : frames[i + 1].start() if i + 1 < len(frames) else len(seg)]
        if i + 1 == len(frames):  # after the last frame: its source line, then the exception
            out.extend(_EXC_AT.split(tail, maxsplit=1))
        else:
            out.append(tail)
    return [p.strip() for p in out if p.strip()]


def _normalise(raw: _Raw) -> Region:
    text = raw.data.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if not text.isascii():
        text = text.translate(_FULLWIDTH)
    text = text.replace("\r\n", "\n")
    region = Region(first_line=raw.line)
    physical = text.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    lines: list[Line] = []
    starts: list[bool] = []  # True for the first piece of a physical line: only those can continue a wrap
    for offset, phys in enumerate(physical):
        no = raw.line + offset
        first = True
        for piece in phys.split("\r"):
            seg = _clean(piece)
            if not seg.strip():
                continue
            for line in _split_prefixed(seg, no):
                lines.append(line)
                starts.append(first)
                first = False
    # a terminal wraps the line as printed, prefix included: widths are read off the physical lines
    widths = {raw.line + k: len(phys) for k, phys in enumerate(physical) if "\r" not in phys}
    region.lines = _rejoin_wrapped(lines, starts, widths)
    return region


_PANE_BORDER = re.compile(r"\s{3,}[x│┃|]\s*$")  # a terminal multiplexer's pane border after the padding


def cut(seg: str, limit: int) -> str:
    """A line longer than `limit` keeps its head and its tail (where an error usually is) around a mark."""
    if len(seg) <= limit:
        return seg
    half = limit // 2
    return f"{seg[:half]} …[{len(seg) - 2 * half} characters cut]… {seg[-half:]}"


def _clean(seg: str) -> str:
    seg = cut(seg, MAX_FLAT)
    if seg.endswith(("x", "│", "┃", "|", " ")) and _PANE_BORDER.search(seg):
        seg = _PANE_BORDER.sub("", seg)
    if "**" in seg:
        seg = _BOLD.sub(r"\1", seg)
    if _CTRL.search(seg):
        seg = _CTRL.sub("", seg)
    stripped = seg.strip()
    if stripped.startswith("```"):
        seg = stripped.strip("`")
    return seg


def _strip_prefixes(seg: str) -> tuple[str, int | None]:
    rank = None
    for _ in range(6):
        for pattern, group in _PREFIXES:
            m = pattern.match(seg)
            if m and m.end() < len(seg):
                if group is not None and rank is None and m.group(group) is not None:
                    rank = int(m.group(group))
                seg = seg[m.end() :]
                break
        else:
            break
    return seg, rank


def _split_prefixed(seg: str, no: int) -> Iterator[Line]:
    seg, rank = _strip_prefixes(seg)
    parts = _GLUE.split(seg) if len(seg) > 20 else [seg]
    if 'File "' in seg:
        parts = [p for part in parts for p in _unflatten(part)]
    for i, part in enumerate(parts):
        if not part.strip():
            continue
        part = cut(part, MAX_LINE)
        if i:
            part, r2 = _strip_prefixes(part)
            yield Line(no, part, r2 if r2 is not None else rank)
        else:
            yield Line(no, part, rank)


def _rejoin_wrapped(lines: list[Line], starts: list[bool] | None = None, phys: dict[int, int] | None = None) -> list[Line]:
    """Undo hard wrapping at a fixed console width (Windows consoles, pasted terminals).

    A line is taken as wrapped when its length is one that at least two long lines share and
    the next line does not look like a line of its own: Windows' 80 columns cut anywhere, other
    widths only where the continuation starts without indentation and differs from the line.
    """

    def width(i: int) -> int:  # the physical line's width for its last piece, else the piece's own
        ln = lines[i]
        last_piece = i + 1 == len(lines) or lines[i + 1].no != ln.no
        return phys.get(ln.no, len(ln.text)) if phys is not None and last_piece else len(ln.text)

    seen: dict[int, set[str]] = {}  # distinct texts per width: a line repeated verbatim is not a wrap
    for i in range(len(lines)):
        if width(i) >= 60:
            seen.setdefault(width(i), set()).add(lines[i].text)
    counts = {w: len(texts) for w, texts in seen.items()}
    # a terminal wraps every line at its width, so no line is longer: a width some line exceeds is a coincidence
    longest = max((width(i) for i in range(len(lines))), default=0)
    widths = {w for w, c in counts.items() if c >= 2 and w <= 400 and w >= longest}
    if not widths:
        return lines
    out: list[Line] = []
    i = 0
    while i < len(lines):
        cur = lines[i]
        text, last_no = cur.text, cur.no
        while (
            width(i) in widths
            and i + 1 < len(lines)
            and lines[i + 1].no == last_no + 1
            and lines[i + 1].rank is None  # a wrapped line's continuation carries no prefix of its own
            and (starts is None or starts[i + 1])
            and _continues(lines[i].text, lines[i + 1], width(i))
        ):
            i += 1
            text += lines[i].text
            last_no = lines[i].no
        out.append(Line(cur.no, text, cur.rank))
        i += 1
    return out


def _continues(text: str, nxt: Line, width: int) -> bool:
    follow = nxt.text
    if _RECORD_START.match(follow) or _RULE_LINE.match(text) or follow[:12] == text[:12]:
        return False
    if width == 80:
        return True
    return not follow[:1].isspace()


def iter_lines(regions: Iterable[Region]) -> Iterator[Line]:
    for region in regions:
        yield from region.lines
