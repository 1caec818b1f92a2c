"""Hard wrapping undone: a line a terminal, an e-mail client or a chat wrapped at its width is joined back, where
the widths and what the next line starts with say it was one line."""

from __future__ import annotations

import re

from kbdebug.core.lazy import lazy
from kbdebug.core.terminals import EXC_NAME, TRACEBACK_HEADER
from kbdebug.normalise.glue import BOLD, pieces
from kbdebug.normalise.region import Line

# (`-*>`: IPython's `---->` arrow, pytest's `>`; never a condition wrapped before its `>=`)
_RECORD_START = lazy(
    r"^\s*(?:=========|Traceback|File \"|\[rank|frame #|<ipython-input|Cell In\[|-*>(?!=)"
    rf"|{EXC_NAME}:)|.*{TRACEBACK_HEADER}"
    rf"|^{EXC_NAME}\s*$"  # an exception raised without a message: its type alone
    # a shell's whole line for the job it lost, never the end of a wrapped line: it follows progress bars
    # redrawn at one width (tqdm), which would otherwise read as a wrap
    r"|^(?:Killed|Terminated|Segmentation fault|Aborted|Bus error|Illegal instruction)(?: \(core dumped\))?\s*$"
)
# ... and of those, the lines no prefixed log's wrap leaves unprefixed: an exception's `Type:` or a traceback's header at
# a line's start is a launcher's own (torchrun's `torch.distributed.elastic...ChildFailedError:` under the ranks' lines)
_OWN_LINE = lazy(rf"^(?:{TRACEBACK_HEADER}|(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*:\s*$)")
_RULE_LINE = lazy(r"^[-=_*#~^\s]+$")  # a rule of punctuation, or the `^~~~` markers under a source line: never wrapped text

_WHOLE_FRAME = lazy(r'^\s*File "[^"\n]*", line \d+, in [\w<>.]+$')

MAX_REWRAPS = 3
CONSOLE_WIDTH = 80  # Windows' console and e-mail clients wrap here, anywhere in a line
MIN_WRAP = 60  # narrower widths are too common among lines of their own to tell a wrap
LONE_WRAP_WINDOW = 20  # a width only one line has is a wrap only when no line this near is longer
_BARE_RANK = lazy(r"^\d{1,4}: ")


def rejoin_wrapped(
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
            text = BOLD.sub(r"\1", text)
        # a flattened traceback or glued records cut by the wrap are told apart only once whole again
        parts = [p for p in pieces(text) if p.strip()] if i > start else [text]
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
    if _RULE_LINE.match(text) or follow[:12] == text[:12]:
        return False
    if _RECORD_START.match(follow) and (not prefixed_only or _OWN_LINE.match(follow)):
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
