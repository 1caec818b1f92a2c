"""What pastes and terminals do to a log, undone line by line before any grammar sees it.

ANSI colours, CRLF, `\r` progress redraws, full-width punctuation, control bytes, rank / timestamp /
log-level / journald / worker prefixes, records glued onto one line, hard wrapping at any width, a
traceback flattened into one paragraph, Markdown bold and fences, pane borders, over-long lines. The
scanner (kbdebug/scan.py) decides which bytes to read; this module turns them into `Line`s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from kbdebug.stamps import Stamp, inner_stamp, parse_stamp

MAX_LINE = 8192
MAX_FLAT = 32 * MAX_LINE  # a log whose newlines were lost is one line: it is split before lines are cut to MAX_LINE


class Line(NamedTuple):
    no: int
    text: str
    rank: int | None = None
    time: Stamp | None = None  # the time its prefix (or its c10/glog bracket) printed: which rank failed first


@dataclass
class Region:
    first_line: int
    lines: list[Line] = field(default_factory=list)


@dataclass
class _Raw:
    start: int  # absolute byte offset
    data: bytes
    line: int  # 1-based line number of `start`


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Prefixes a launcher, a logging handler or a paste put before a line; the named groups `rank` and `time`
# are kept on the Line (the time is read by kbdebug/stamps.py).
_PREFIXES = [
    re.compile(r"^\[rank(?P<rank>\d+)\]:\s?"),
    re.compile(r"^\[default(?P<rank>\d+)\]:\s?"),
    re.compile(r"^\((?:RayWorker|RayWorkerWrapper|[A-Za-z_]+)?(?: rank=(?P<rank>\d+))? ?pid=\d+(?:, ip=[\d.]+)?\)\s"),
    # systemd's journal: `Oct 04 15:02:41 host unit[394]: `
    re.compile(r"^(?P<time>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) \S+ [^\s:\[]+(?:\[\d+\])?: "),
    # glog / vLLM style: `ERROR 03-19 07:27:53 [file.py:375] `
    re.compile(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[[^\]\s]+\] "),
    # glog itself: `I0501 12:03:11.123456 12345 file.cc:123] `
    re.compile(r"^(?P<time>[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?) +\d+ [^\]\s]+:\d+\] "),
    # a notebook's or a chat's `Error: ` before the exception line itself
    re.compile(r"^(?:Error|ERROR|Exception)\s*:\s+(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):)"),
    re.compile(r"^(?P<time>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s*(?:\|\s*)?"),
    re.compile(r"^\[(?P<time>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)[^\]]*\]\s*"),
    re.compile(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\s*\|(?:[^|\n]*\|)+[^|:\n]*?:\s+"),
    re.compile(r"^\[?(?:INFO|WARNING|DEBUG|CRITICAL|FATAL)\]?(?::|\s+-)\s+"),
    # Python logging's `%(asctime)s - %(name)s - %(levelname)s - ` once the time is gone
    re.compile(r"^-\s+(?:[\w.]+\s+-\s+)?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\s+- ?"),
    re.compile(r"^(?P<rank>\d{1,4}): (?=\s*\S)"),
    re.compile(r"^>\s?"),
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


def normalise(raw: _Raw) -> Region:
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


def _strip_prefixes(seg: str) -> tuple[str, int | None, Stamp | None]:
    rank: int | None = None
    time: Stamp | None = None
    for _ in range(6):
        for pattern in _PREFIXES:
            m = pattern.match(seg)
            if m and m.end() < len(seg):
                found = m.groupdict()
                if rank is None and found.get("rank") is not None:
                    rank = int(found["rank"])
                if time is None and found.get("time") is not None:
                    time = parse_stamp(found["time"])
                seg = seg[m.end() :]
                break
        else:
            break
    if time is None and seg[:1] == "[":  # c10's own `[E1004 15:02:41.906416 ProcessGroupNCCL.cpp:616]` stays in the text
        time = inner_stamp(seg)
    return seg, rank, time


def _split_prefixed(seg: str, no: int) -> Iterator[Line]:
    seg, rank, time = _strip_prefixes(seg)
    parts = _GLUE.split(seg) if len(seg) > 20 else [seg]
    if 'File "' in seg:
        parts = [p for part in parts for p in _unflatten(part)]
    for i, part in enumerate(parts):
        if not part.strip():
            continue
        part = cut(part, MAX_LINE)
        if i:
            part, r2, t2 = _strip_prefixes(part)
            yield Line(no, part, r2 if r2 is not None else rank, t2 or time)
        else:
            yield Line(no, part, rank, time)


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
        out.append(cur._replace(text=text))
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
