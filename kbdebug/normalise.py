"""What pastes and terminals do to a log, undone line by line before any grammar sees it.

ANSI colours, CRLF, `\r` progress redraws, full-width punctuation, control bytes, rank / timestamp /
log-level / journald / worker prefixes, records glued onto one line, hard wrapping at any width, a
traceback flattened into one paragraph, Markdown bold and fences, pane borders, the box rich draws
around a traceback, over-long lines. The
scanner (kbdebug/scan.py) decides which bytes to read; this module turns them into `Line`s. Its patterns are
compiled when first used (kbdebug.core.lazy): a live exception's diagnosis imports this module and never
normalises a log.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from kbdebug.core.lazy import lazy
from kbdebug.core.stamps import Stamp, inner_stamp, parse_stamp
from kbdebug.core.terminals import EXC_NAME, TRACEBACK_HEADER

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
_GLUE = lazy(
    rf"(?<=\S)(?={TRACEBACK_HEADER}:)"
    r"|(?<=[^=\s])\s*(?==========(?:\s|$))"
    r"|(?<==========) +(?==========(?:\s|$))"  # the tool's empty line glued before its next one
    r"|(?<=` failed\.)(?=\S)"
    r"|(?<=` failed\.) +(?=\S+\.(?:cu|cuh|h|hpp|cpp|c):\d+: )"  # a flood whose newlines became spaces (Markdown)
    r"|(?<=\S)(?=\[E(?:\d{3,4} [\d:.]+)? ProcessGroupNCCL)"
    r"|(?<=\S)\s*(?=\[rank\d+\]:)"  # a rank's line glued on, its newline lost or made a space (Markdown)
    # glog's own prefix (torchrun's agent, c10d): severity, date, time, thread and file:line] start a line
    r"|(?<=\S)\s+(?=[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\s]+:\d+\] )"
    rf"|(?<=\. )(?={EXC_NAME}: |(?:CUDA|HIP) error: )"  # a sentence that starts a new error
    # the failing source line with its error glued on after it (`tp = torch.sum(gt * pr) RuntimeError: ...`): a paste
    # whose newlines Markdown made spaces
    # (a type with a name before its suffix: `Graphics Exception: ESR ...` in an Xid line is no error glued on)
    r"|(?<=[\w)\]]) +(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w+(?:Error|Exception|Warning): )"
)
# Each alternative of _GLUE needs one of these in the line (most lines hold none; asking is a tenth of the cost of
# _GLUE's lookbehinds at every position): its texts; a kernel assert's `` ` failed.`` with more after it (a line
# that ends there, as each assert of a flood does, has nothing glued on); a glog severity and month (` E0`, ` W1`)
# with a `] `; a sentence's end and a `: `; an error's type after a space that follows code (_glued_error). Keep them
# beside _GLUE: tests/test_normalise_damage.py checks every line
# _GLUE splits in the fixtures and rule examples holds them.
_GLUE_TEXTS = ("Traceback", "=========", "ProcessGroupNCCL", "[rank")
_GLOG_HEADS = tuple(f"{space}{severity}{month}" for space in " \t" for severity in "IWEF" for month in "01")
_FAILED = "` failed."


_TYPE_ENDS = ("Error: ", "Exception: ", "Warning: ")


def _glued_error(seg: str) -> bool:
    """An exception's `Type: ` after spaces that follow a word, `)` or `]`: what _GLUE's last alternative splits at,
    found with string searches (a line starting with its type has nothing before it)."""
    for end in _TYPE_ENDS:
        at = seg.find(end)
        while at > 0:
            start = at
            while start > 0 and (seg[start - 1].isalnum() or seg[start - 1] in "._"):
                start -= 1
            named = start < at  # `ValueError`, not a bare `Exception` after a word
            before = len(seg[:start].rstrip(" "))  # past the spaces the split takes (one or more, as _GLUE's ` +`)
            if named and 0 < before < start and (seg[before - 1].isalnum() or seg[before - 1] in ")]_"):
                return True
            at = seg.find(end, at + 1)
    return False


def _may_glue(seg: str) -> bool:
    """Whether `_GLUE` may split the line: it holds what one of its alternatives needs."""
    if any(t in seg for t in _GLUE_TEXTS) or (". " in seg and ": " in seg) or _glued_error(seg):
        return True
    failed = seg.find(_FAILED)
    if failed >= 0 and seg[failed + len(_FAILED) :].strip():
        return True
    return "] " in seg and any(h in seg for h in _GLOG_HEADS)


# an exception type wrapped onto the end of the source line above its message: `    loss = f(x) IndexError:` (never
# a warning's `file.py:104: UserWarning:`, whose message Python prints on the next line, nor the code that names a type
# before its block's colon: `except FileNotFoundError:`, pasted code, is no error)
_TYPE_AT_END = lazy(rf"(?<=[^\s:])(?<!\bexcept)\s+(?={EXC_NAME}:\s*$)")
# Markdown bold as CommonMark reads it: `**` that is not part of a longer run of stars, hugging its text.
# Slurm's `*** JOB 1 CANCELLED ***` is no bold: a run of three, with spaces inside, stays as the log printed it.
_BOLD = lazy(r"(?<!\*)\*\*(?=[^*\s])([^*\n]+?)(?<=[^*\s])\*\*(?!\*)")
# (`-*>`: IPython's `---->` arrow, pytest's `>`; never a condition wrapped before its `>=`)
_RECORD_START = lazy(
    r"^\s*(?:=========|Traceback|File \"|\[rank|frame #|<ipython-input|Cell In\[|-*>(?!=)"
    rf"|{EXC_NAME}:)|.*{TRACEBACK_HEADER}"
    rf"|^{EXC_NAME}\s*$"  # an exception raised without a message: its type alone
    # a shell's whole line for the job it lost, never the end of a wrapped line: it follows progress bars
    # redrawn at one width (tqdm), which would otherwise read as a wrap
    r"|^(?:Killed|Terminated|Segmentation fault|Aborted|Bus error|Illegal instruction)(?: \(core dumped\))?\s*$"
)
_RULE_LINE = lazy(r"^[-=_*#~^\s]+$")  # a rule of punctuation, or the `^~~~` markers under a source line: never wrapped text


# Translated pages and CJK input methods print ASCII punctuation in its full-width form: fold the whole
# full-width ASCII block (U+FF01-U+FF5E) and the ideographic space back, so `RuntimeError：CUDA error：`
# reads as it was printed.
_FULLWIDTH = {0xFF01 + i: 0x21 + i for i in range(94)} | {0x3000: 0x20}
_WHOLE_FRAME = lazy(r'^\s*File "[^"\n]*", line \d+, in [\w<>.]+$')
_FRAME_AT = lazy(r'File "[^"\n]*", line \d+(?:, in [^\s(]+)?')
_EXC_AT = lazy(rf"(?<=\s)(?={EXC_NAME}:\s)")


def _unflatten(seg: str) -> list[str]:
    """A traceback whose newlines were lost (a Markdown paragraph, a chat paste) back into its lines:
    each frame, the source line after it, and the exception line after the last one (one frame too)."""
    frames = list(_FRAME_AT.finditer(seg))
    # one frame that starts the line is a frame line, unless its source line was glued on after it, past a space (not
    # the rest of the frame, as `, in__call__` is where a paste lost the space after `in`)
    if not frames or (len(frames) == 1 and frames[0].start() == len(seg) - len(seg.lstrip()) and not _glued_code(seg[frames[0].end() :])):
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


def _glued_code(tail: str) -> bool:
    """What follows a frame on its line is its source line: after a space, and no part of the frame itself (`, in f`,
    faulthandler's ` in f` without the comma)."""
    return tail[:1].isspace() and bool(tail.strip()) and not tail.lstrip().startswith((",", "in "))


def normalise(data: bytes, first_line: int = 1) -> Region:
    """The region of the log's bytes `data`, whose first line is line `first_line` of the log."""
    text = data.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if not text.isascii():
        text = text.translate(_FULLWIDTH)
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
        lines, heads, widths, ends = _rejoin_wrapped(lines, heads, widths, ends)
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


def cut(seg: str, limit: int) -> str:
    """A line longer than `limit` keeps its head and its tail (where an error usually is) around a mark."""
    if len(seg) <= limit:
        return seg
    half = limit // 2
    return f"{seg[:half]} …[{len(seg) - 2 * half} characters cut]… {seg[-half:]}"


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
        seg = _BOLD.sub(r"\1", seg)
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
    for _ in range(6):
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


def _pieces(seg: str) -> list[str]:
    """The records glued onto one line, and a flattened traceback's lines, apart."""
    parts = _GLUE.split(seg) if len(seg) > 20 and _may_glue(seg) else [seg]
    if 'File "' in seg:
        parts = [p for part in parts for p in _unflatten(part)]
    if seg.rstrip().endswith(":"):  # indented or not: a paste without its code fence loses the indentation
        parts = [p for part in parts for p in _TYPE_AT_END.split(part)]
    return parts


def _split_prefixed(seg: str, no: int) -> Iterator[Line]:
    bare, rank, time = _strip_prefixes(seg)
    if len(bare) < len(seg) and bare.lstrip()[:1] == "`":  # quoted, ranked or stamped code: its backticks follow the prefix
        bare = _uncode(bare)
    seg = bare
    for i, part in enumerate(_pieces(seg)):
        if not part.strip():
            continue
        part = cut(part, MAX_LINE)
        if i:
            part, r2, t2 = _strip_prefixes(part)
            yield Line(no, part, r2 if r2 is not None else rank, t2 or time)
        else:
            yield Line(no, part, rank, time)


MAX_REWRAPS = 3
CONSOLE_WIDTH = 80  # Windows' console and e-mail clients wrap here, anywhere in a line
MIN_WRAP = 60  # narrower widths are too common among lines of their own to tell a wrap
LONE_WRAP_WINDOW = 20  # a width only one line has is a wrap only when no line this near is longer
_BARE_RANK = lazy(r"^\d{1,4}: ")


def _rejoin_wrapped(
    lines: list[Line], heads: list[str | None], widths: list[int], ends: list[int]
) -> tuple[list[Line], list[str | None], list[int], list[int]]:
    """Undo hard wrapping at a fixed console width (Windows consoles, pasted terminals, e-mail).

    A line is taken as wrapped when its width is one that at least two long lines share (each followed by
    another line: a line repeated verbatim with the same successor is not a wrap), no line between them is
    longer (a terminal wraps every line at its width), and the next line does not look like a line of its
    own: Windows' 80 columns cut anywhere, other widths only where the continuation is not indented (one
    space is the one the cut fell before) and differs from the line. The one longest line of its neighbourhood is a wrap too when it
    is an indented traceback line followed by an unindented piece (a frame or source line cut in two).
    Returns the lines, their heads, their widths as printed before the wrap and the physical lines they end on.
    """
    shared, lone = _wrap_widths(lines, widths)
    if not shared and not lone:
        return lines, heads, widths, ends
    out: list[Line] = []
    out_heads: list[str | None] = []
    out_widths: list[int] = []
    out_ends: list[int] = []
    i = 0
    while i < len(lines):
        cur, start = lines[i], i
        text, total = cur.text, widths[i]
        # a continuation is never wider than the line it continues (it would have been wrapped too)
        while i + 1 < len(lines) and lines[i + 1].no == ends[i] + 1 and heads[i + 1] is not None and widths[i + 1] <= widths[i]:
            follow = _continuation(cur, lines[i + 1], heads[i + 1] or "")
            if follow is None or not (
                (widths[i] in shared and _continues(lines[i].text, follow, widths[i], _prefixed_only(cur, lines[i + 1])))
                or (i in lone and _continues_lone(lines[i].text, follow))
            ):
                break
            i += 1
            text += follow
            total += widths[i]
        if i > start and "**" in text:  # Markdown bold opened before the wrap and closed after it
            text = _BOLD.sub(r"\1", text)
        # a flattened traceback or glued records cut by the wrap are told apart only once whole again
        parts = [p for p in _pieces(text) if p.strip()] if i > start else [text]
        for k, part in enumerate(parts or [text]):
            out.append(cur._replace(text=part))
            out_heads.append(heads[start] if k == 0 else None)
            out_widths.append((total if i > start else widths[i]) if k == len(parts) - 1 else len(part))
            out_ends.append(ends[i])
        i += 1
    return out, out_heads, out_widths, out_ends


def _wrap_widths(lines: list[Line], widths: list[int]) -> tuple[set[int], set[int]]:
    """The widths lines were wrapped at, and the lone lines (by index) that are the one wrapped line of a paste."""
    # distinct (line, next line) pairs per width: a line repeated verbatim is no wrap, unless at 80 columns, where
    # the head of each of many similar lines (a kernel assert per thread) is the same and only what follows differs
    pairs: dict[int, set[tuple[str, str]]] = {}
    span: dict[int, tuple[int, int]] = {}
    for i, w in enumerate(widths):
        if w >= MIN_WRAP and i + 1 < len(lines):
            pairs.setdefault(w, set()).add((lines[i].text, lines[i + 1].text if w == CONSOLE_WIDTH else ""))
            span[w] = (span[w][0] if w in span else i, i)
    shared = {w for w, p in pairs.items() if len(p) >= 2 and w <= 400 and max(widths[span[w][0] : span[w][1] + 2]) <= w}
    lone = set()
    for w, (first, last) in span.items():
        i = first
        # an indented traceback line, or a line cut inside (see _cut_inside) at the 80 columns of a Windows console or an
        # e-mail (a log with one long line has one piece of that width: no second one to share it with)
        if first == last and (lines[i].text[:1].isspace() or (w == CONSOLE_WIDTH and _cut_inside(lines[i].text, lines[i + 1].text))):
            near = widths[max(0, i - LONE_WRAP_WINDOW) : i + LONE_WRAP_WINDOW]
            if max(near) == w and near.count(w) == 1:
                lone.add(i)
    return shared, lone


# a condition's operator and its space (`idx_dim` + `>= 0 && ...`): a wrapped expression goes on with one, no line
# of its own starts so (valgrind's `==4242==` is no operator)
_OPERATOR_HEAD = lazy(r"^(?:[<>=!]=|&&|\|\|)\s")


def _cut_inside(text: str, follow: str) -> bool:
    """The break falls inside a word or a path (`.../work/tor` + `ch/lib/...`), before an expression's operator,
    or on the space between two words (the console leaves it at the end of one row or the start of the next):
    no line of its own ends and starts so."""
    mid_word = text[-1:].isalnum() and (follow[:1].isalnum() or follow[:1] in "_/.")
    before_space = text[-1:].strip() and follow[:1] == " " and follow[1:2].strip()
    # after the space, what goes on is a sentence's or an expression's next word: a capital may start a line of its own
    after_space = text[-1:] == " " and text[-2:-1].strip() and (follow[:1].islower() or follow[:1].isdigit() or follow[:1] in "'\"([")
    return bool(mid_word or _OPERATOR_HEAD.match(follow) or before_space or after_space)


def _continuation(cur: Line, nxt: Line, head: str) -> str | None:
    """The text a wrapped line continues with, or None when the next line is another rank's line of its own.

    A continuation carries no prefix of its own, or the head's rank when every line was prefixed after the
    wrap; a continuation that starts with digits and a colon (`9: UserWarning`) is a cut number, not a rank.
    """
    if nxt.rank is None or nxt.rank == cur.rank:
        return nxt.text
    if cur.rank is None and _BARE_RANK.match(head):
        return head
    return None


def _prefixed_only(cur: Line, nxt: Line) -> bool:
    """The head carries a prefix and the next line none: in a prefixed log that is a continuation, whatever it looks like."""
    return (cur.rank is not None or cur.time is not None) and nxt.rank is None and nxt.time is None


def _continues(text: str, follow: str, width: int, prefixed_only: bool = False) -> bool:
    if _RULE_LINE.match(text) or follow[:12] == text[:12] or (not prefixed_only and _RECORD_START.match(follow)):
        return False
    if width == CONSOLE_WIDTH:
        # ... except a frame line that is whole (it ends in its function's name) before its indented source
        # line: a frame exactly as wide as the console
        return not (follow[:2].isspace() and _WHOLE_FRAME.match(text))
    return not follow[:2].isspace()  # a cut before a space leaves one; an indented line of its own has two or more


def _continues_lone(text: str, follow: str) -> bool:
    """An indented traceback line (a frame, a source line) cut in two: the piece after it is not indented as they are.
    A whole statement (its brackets closed) followed by a sentence, or by the text of a string literal it holds
    (`assert ..., "shapes differ"`), is the source line and the error's message pasted without its type, not one
    line cut in two."""
    if len(follow) - len(follow.lstrip()) >= 2 or _RECORD_START.match(follow) or _RULE_LINE.match(text):
        return False
    return not (_closed(text) and (_PROSE.match(follow) or _quoted(text, follow)))


MIN_QUOTED = 8


def _quoted(code: str, follow: str) -> bool:
    """Whether the next line begins as a string literal of the source line does: the message it raises."""
    head = follow.strip()[:12]
    return len(head) >= MIN_QUOTED and ("'" + head in code or '"' + head in code)


# a sentence's start: a capitalised word (`CUDA`, `Invalid`) and two lower-case words after it
_PROSE = lazy(r"^[A-Z][\w-]*(?: [a-z][\w-]*){2}")


def _closed(code: str) -> bool:
    """Whether every bracket the line opens, it closes (outside string literals, roughly): a statement that could end there."""
    depth = 0
    for ch in re.sub(r"'[^']*'|\"[^\"]*\"", "", code):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def lines_of(text: str) -> list[Line]:
    """A small text's lines as the grammars read them (no scanning for needles: all of it)."""
    return normalise(text.encode("utf-8", "surrogatepass")).lines


def iter_lines(regions: Iterable[Region]) -> Iterator[Line]:
    for region in regions:
        yield from region.lines
