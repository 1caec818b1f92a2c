"""What pastes and terminals do to a log, undone line by line before any grammar sees it.

ANSI colours, CRLF, `\r` progress redraws, full-width punctuation, control bytes, rank / timestamp /
log-level / journald / worker prefixes, records glued onto one line, hard wrapping at any width, a
traceback flattened into one paragraph, Markdown bold and fences, pane borders, the box rich draws
around a traceback, over-long lines. The scanner (kbdebug/scan.py) decides which bytes to read; this package
turns them into `Line`s: here each physical line is cleaned and its prefixes read, `glue` splits what a paste glued
onto one line, `wrap` joins what a terminal wrapped, `region` holds the result. Its patterns are compiled when first
used (kbdebug.core.lazy): a live exception's diagnosis imports this package and never normalises a log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from kbdebug.core.lazy import lazy
from kbdebug.core.stamps import Stamp, inner_stamp, parse_stamp
from kbdebug.core.terminals import EXC_NAME
from kbdebug.normalise.glue import BOLD, pieces
from kbdebug.normalise.region import MAX_FLAT, MAX_LINE, Line, Region, cut, iter_lines
from kbdebug.normalise.wrap import MAX_REWRAPS, rejoin_wrapped

__all__ = ["MAX_FLAT", "MAX_LINE", "Line", "Region", "cut", "iter_lines", "lines_of", "normalise"]

_ANSI = lazy(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = lazy(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Prefixes a launcher, a logging handler or a paste put before a line; the named groups `rank` and `time`
# are kept on the Line (the time is read by kbdebug/core/stamps.py).
_PREFIXES = [
    lazy(r"^\[rank(?P<rank>\d+)\]:\s?"),
    # torchrun's --tee (TailLog) writes `[default0]:` and then the line verbatim: its indentation is the line's
    lazy(r"^\[default(?P<rank>\d+)\]:"),
    lazy(r"^\((?:RayWorker|RayWorkerWrapper|[A-Za-z_]+)?(?: rank=(?P<rank>\d+))? ?pid=\d+(?:, ip=[\d.]+)?\)\s"),
    # systemd's journal: `Oct 04 15:02:41 host unit[394]: `
    lazy(r"^(?P<time>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) \S+ [^\s:\[]+(?:\[\d+\])?: "),
    # glog / vLLM style: `ERROR 03-19 07:27:53 [file.py:375] `
    lazy(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[[^\]\s]+\](?: |$)"),
    # glog itself: `I0501 12:03:11.123456 12345 file.cc:123] `
    lazy(r"^(?P<time>[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?) +\d+ [^\]\s]+:\d+\] "),
    # a notebook's or a chat's `Error: ` before the exception line itself
    lazy(rf"^(?:Error|ERROR|Exception)\s*:\s+(?={EXC_NAME}:)"),
    lazy(r"^(?P<time>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s*(?:\|\s*)?"),
    lazy(r"^\[(?P<time>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)[^\]]*\]\s*"),
    lazy(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\s*\|(?:[^|\n]*\|)+[^|:\n]*?:\s+"),
    lazy(r"^\[?(?:INFO|WARNING|DEBUG|CRITICAL|FATAL)\]?(?::|\s+-)\s+"),
    # Python logging's `%(asctime)s - %(name)s - %(levelname)s - ` once the time is gone
    lazy(r"^-\s+(?:[\w.]+\s+-\s+)?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\s+- ?"),
    lazy(r"^(?P<rank>\d{1,4}): (?=\s*\S|$)"),
    # a wrapper re-printing its child's streams (`accelerate test`, subprocess runners): `stderr: ` on every line
    lazy(r"^(?:stderr|stdout|STDERR|STDOUT)\s?:\s?"),
    # pdsh / DeepSpeed's multi-node runner: `<host>: ` before every line (a host name has a digit and a - or .);
    # not an extension's lower-case error class, which reads like one (`cv2.error: OpenCV(4.8.0) ...`)
    lazy(r"^(?=[a-z0-9.-]*\d)(?=[a-z0-9.]*-|[a-z0-9-]*\.)(?![a-z0-9.-]*\.(?:error|timeout): )[a-z][a-z0-9.-]*[a-z0-9]: "),
    # Python logging's `%(asctime)s [%(levelname)s] %(name)s - ` with a short date
    lazy(r"^\d\d/\d\d(?:/\d{2,4})? \d\d:\d\d:\d\d(?:[.,]\d+)? \[(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\] [\w.]+ - "),
    lazy(r"^>(?!=)\s?"),  # a mail/Markdown quote; `>= ...` is a wrapped comparison, not a quote
    lazy(r"^(?:\.\.\.|…)\s*(?=\S)"),  # a paste cut at its start and marked so
    lazy(r"^E {3,}(?=\S)"),  # pytest's margin before the lines of the error it caught
]
# Whether any prefix starts the line, asked once (most lines have none): the prefixes as one alternation, their groups
# unnamed (several name theirs alike)
_ANY_PREFIX = lazy("|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', str(p.pattern))})" for p in _PREFIXES))


# Translated pages and CJK input methods print ASCII punctuation in its full-width form: fold the whole
# full-width ASCII block (U+FF01-U+FF5E) and the ideographic space back, so `RuntimeError：CUDA error：`
# reads as it was printed. A word processor, a chat or a web page does the same to quotes and spaces: curly
# quotes (`No module named ‘timm’`), no-break spaces; and leaves invisible zero-width spaces and byte-order marks.
_ASCII_FORMS = (
    {0xFF01 + i: 0x21 + i for i in range(94)}
    | {0x3000: 0x20, 0x00A0: 0x20, 0x202F: 0x20}
    | dict.fromkeys((0x2018, 0x2019, 0x201A, 0x201B, 0x2032), 0x27)
    | dict.fromkeys((0x201C, 0x201D, 0x201E, 0x201F, 0x2033), 0x22)
    | dict.fromkeys((0x200B, 0xFEFF), None)
)
# A log copied out of a web page's source, or a tool that escaped it for HTML: `index &gt;= -size`, `&#39;cuda:0&#39;`
_ENTITY = lazy(r"&(?:lt|gt|amp|quot|apos|nbsp|#\d{2,4}|#x[0-9a-fA-F]{2,4});")


def normalise(data: bytes, first_line: int = 1) -> Region:
    """The region of the log's bytes `data`, whose first line is line `first_line` of the log."""
    text = data.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "&" in text and _ENTITY.search(text):
        import html

        # only the entities themselves: html.unescape of the whole text would also read `&para` of a URL's `&param=`
        text = _ENTITY.sub(lambda m: html.unescape(m.group()), text)
    if not text.isascii():
        text = text.translate(_ASCII_FORMS)
    text = text.replace("\r\n", "\n")
    region = Region(first_line=first_line, source=data)
    physical = text.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    lines: list[Line] = []
    heads: list[str | None] = []  # the first piece of a physical line as printed (only those can continue a wrap), else None
    boxed: set[int] = set()  # lines drawn inside a box: as wide as the box, and never wrapped
    for offset, phys in enumerate(physical):
        no = first_line + offset
        first = True
        for piece in phys.split("\r"):
            in_box = piece.lstrip()[:1] in _BOX_CHARS
            seg = _clean(piece, in_box)
            if not seg.strip():
                continue
            if in_box:
                boxed.add(no)
            for line in _split_prefixed(seg, no):
                lines.append(line)
                heads.append(seg if first and no not in boxed else None)
                first = False
    # a terminal wraps the line as printed, prefix included: widths are read off the physical lines
    phys_widths = {first_line + k: len(phys) for k, phys in enumerate(physical) if "\r" not in phys and first_line + k not in boxed}
    widths = [
        phys_widths.get(ln.no, len(ln.text)) if i + 1 == len(lines) or lines[i + 1].no != ln.no else len(ln.text)
        for i, ln in enumerate(lines)
    ]
    ends = [ln.no for ln in lines]  # the physical line each ends on
    for _ in range(MAX_REWRAPS):  # a paste wrapped twice (a terminal at 137 columns, then an e-mail at 80) is undone twice
        before = len(lines)
        lines, heads, widths, ends = rejoin_wrapped(lines, heads, widths, ends)
        if len(lines) == before:
            break
    region.lines = lines
    for ln, end in zip(lines, ends, strict=True):
        if end > region.ends.get(ln.no, ln.no):
            region.ends[ln.no] = end
    return region


_PANE_BORDER = lazy(r"\s{3,}[x│┃|]\s*$")  # a terminal multiplexer's pane border after the padding
# A boxed traceback (rich.traceback, as Lightning and typer print it): the box's title line is the header
# (`╭──── Traceback (most recent call last) ────╮`), its sides and bottom are decoration.
_BOX_CHARS = frozenset("╭┌│┃╰└")


def _unbox(seg: str) -> str:
    """A boxed line's content: the title of a top edge, nothing of a bottom one, a side's inside. By string
    operations, in one pass: a lazy regex over a line of blanks (a box drawn wide) took quadratic time."""
    body = seg.strip()
    corner, rest = body[:1], body[1:]
    if corner in "╭┌" and rest[:1] == "─" and rest[-1:] in ("╮", "┐"):
        return rest[:-1].strip("─").strip()
    if corner in "╰└" and rest[-1:] in ("╯", "┘") and set(rest[:-1]) == {"─"}:
        return ""
    if corner in "│┃":
        inside = seg.lstrip()[1:]
        inside = (inside[1:] if inside[:1] == " " else inside).rstrip()
        return (inside[:-1] if inside[-1:] in ("│", "┃") else inside).rstrip()
    return seg


def _clean(seg: str, in_box: bool) -> str:
    seg = cut(seg, MAX_FLAT)
    if seg.endswith(("x", "│", "┃", "|", " ")) and _PANE_BORDER.search(seg):
        seg = _PANE_BORDER.sub("", seg)
    if in_box:
        seg = _unbox(seg)
    if "**" in seg:
        seg = BOLD.sub(r"\1", seg)
    if _CTRL.search(seg):
        seg = _CTRL.sub("", seg)
    return _uncode(seg)


def _uncode(seg: str) -> str:
    """A line pasted as Markdown code (a fence, or inline: `RuntimeError: ...`) without its backticks."""
    stripped = seg.strip()
    if stripped.startswith("```"):
        seg = stripped.strip("`")
    elif stripped.startswith("`"):
        seg = stripped[1:]
        if seg.endswith("`") and seg.count("`") % 2:
            seg = seg[:-1]
    return seg


def _strip_prefixes(seg: str) -> tuple[str, int | None, Stamp | None]:
    rank: int | None = None
    time: Stamp | None = None
    for _ in range(6 if _ANY_PREFIX.match(seg) else 0):
        for pattern in _PREFIXES:
            m = pattern.match(seg)
            if m and m.end():  # a line that is all prefix was a blank line before it was prefixed
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
    bare, rank, time = _strip_prefixes(seg)
    if len(bare) < len(seg) and bare.lstrip()[:1] == "`":  # quoted, ranked or stamped code: its backticks follow the prefix
        bare = _uncode(bare)
    seg = bare
    for i, part in enumerate(pieces(seg)):
        if not part.strip():
            continue
        part = cut(part, MAX_LINE)
        if i:
            part, r2, t2 = _strip_prefixes(part)
            yield Line(no, part, r2 if r2 is not None else rank, t2 or time)
        else:
            yield Line(no, part, rank, time)


def lines_of(text: str) -> list[Line]:
    """A small text's lines as the grammars read them (no scanning for needles: all of it)."""
    return normalise(text.encode("utf-8", "surrogatepass")).lines
