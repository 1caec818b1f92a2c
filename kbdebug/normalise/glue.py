"""Records glued onto one line apart: a paste that lost its newlines (Markdown made them spaces, a chat flattened a
traceback into a paragraph) is read as the lines it was."""

from __future__ import annotations

from kbdebug.core.lazy import lazy
from kbdebug.core.terminals import EXC_NAME, TRACEBACK_HEADER

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
# (each after the line's first character: what starts a line is glued to nothing; c10's `[E ... ProcessGroupNCCL` is
# glued on where its `[E` is)
_GLUE_TEXTS = ("Traceback", "=========", "[rank")
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
    body = seg.lstrip()
    if any(body.find(t, 1) > 0 for t in _GLUE_TEXTS) or ("ProcessGroupNCCL" in body and body.find("[E", 1) > 0):
        return True
    if (". " in seg and ": " in seg) or _glued_error(seg):
        return True
    failed = seg.find(_FAILED)
    if failed >= 0 and seg[failed + len(_FAILED) :].strip():
        return True
    return "] " in seg and any(h in seg for h in _GLOG_HEADS)


# an exception type wrapped onto the end of the source line above its message: `    loss = f(x) IndexError:` (never
# a warning's `file.py:104: UserWarning:`, whose message Python prints on the next line, nor the code that names a type
# before its block's colon: `except FileNotFoundError:`, pasted code, is no error)
_TYPE_AT_END = lazy(rf"(?<=[^\s:])(?<!\bexcept)\s+(?={EXC_NAME}:\s*$)")
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
        # after a frame: its source line, then the exception where the traceback ends there (after the last frame, or
        # a chained one's: `... return torch.layer_norm( torch.AcceleratorError: CUDA error: ... During handling ...`)
        out.extend(_EXC_AT.split(seg[m.end() : frames[i + 1].start() if i + 1 < len(frames) else len(seg)], maxsplit=1))
    return [p.strip() for p in out if p.strip()]


# IPython's traceback flattened the same way: each frame (`~/seg/loss.py in forward(self, x)`, IPython 8's
# `File ~/seg/loss.py:346, in forward(self, x)` and `Cell In[12], line 7`) and each numbered context line (`344     code`,
# the failing one marked `--> 346     code`) starts a line (never the number after an arrow's `-->`)
_IPY_FRAME = r"(?:(?:~|/|[A-Za-z]:\\)\S*\.py in (?:\w+\(|<module>)|File \S+\.py:\d+, in |Cell In\s*\[\d+\], line \d+)"
_IPY_AT = lazy(rf"(?<=\S)\s+(?={_IPY_FRAME})")
_IPY_PIECE = lazy(
    rf"(?<=[^\s>-])\s+(?={_IPY_FRAME}|-*> \d{{1,5}} |\d{{1,5}} {{2,}}\S|\d{{1,5}} \d{{1,5}} {{2,}}\S)"
    # a frame's first context line, unindented code after one space: after the frame's `)`, `<module>` or `line 7`
    r"|(?:(?<=\))|(?<=[^-]>)|(?<=line \d)|(?<=line \d\d)|(?<=line \d\d\d))\s+(?=\d{1,5} +\S)"
)


def _unflatten_ipython(seg: str) -> list[str]:
    """An IPython traceback flattened into one line back into its frames and context lines (the error after the last
    context line is split off by _GLUE, as after any source line)."""
    return [p for p in _IPY_PIECE.split(seg) if p.strip()] if _IPY_AT.search(seg) else [seg]


def _glued_code(tail: str) -> bool:
    """What follows a frame on its line is its source line: after a space, and no part of the frame itself (`, in f`,
    faulthandler's ` in f` without the comma)."""
    return tail[:1].isspace() and bool(tail.strip()) and not tail.lstrip().startswith((",", "in "))


def pieces(seg: str) -> list[str]:
    """The records glued onto one line, and a flattened traceback's lines, apart."""
    parts = _GLUE.split(seg) if len(seg) > 20 and _may_glue(seg) else [seg]
    if 'File "' in seg:
        parts = [p for part in parts for p in _unflatten(part)]
    elif (".py in " in seg or "Cell In" in seg or ".py:" in seg) and len(seg) > 200:
        parts = [p for part in parts for p in _unflatten_ipython(part)]
    if seg.rstrip().endswith(":"):  # indented or not: a paste without its code fence loses the indentation
        parts = [p for part in parts for p in _TYPE_AT_END.split(part)]
    return parts


# Markdown bold as CommonMark reads it: `**` that is not part of a longer run of stars, hugging its text.
# Slurm's `*** JOB 1 CANCELLED ***` is no bold: a run of three, with spaces inside, stays as the log printed it.
BOLD = lazy(r"(?<!\*)\*\*(?=[^*\s])([^*\n]+?)(?<=[^*\s])\*\*(?!\*)")
