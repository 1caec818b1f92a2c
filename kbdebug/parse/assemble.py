"""The line-by-line walk of a region: each line goes to the readers of the formats it may hold,
which build records and join multi-line ones (tracebacks, sanitizer reports, C++ error blocks)."""

from __future__ import annotations

import itertools

from kbdebug.normalise import Line
from kbdebug.parse.asserts import _ASSERT_HINT, _COORD, _FUZZY_FILE, AssertReader
from kbdebug.parse.cuda import CudaReader
from kbdebug.parse.derive import anchors, line_start, may_hold, own_line
from kbdebug.parse.distributed import DistributedReader
from kbdebug.parse.grammar import GRAMMARS, parse
from kbdebug.parse.job import JobReader
from kbdebug.parse.messages import MessageReader
from kbdebug.parse.sanitizer import _SAN_CMD, _SAN_TOOL_OPT, SanitizerReader
from kbdebug.parse.tracebacks import _CARETS, MAX_MESSAGE_LINES, MIN_CUT_MESSAGE, PROGRESS_BAR, TracebackReader, raised_literal
from kbdebug.records import ArchWarning, CppException, CudaError, ElasticFailure, Frame, PyException, Record, SanitizerReport

FALLBACK_LINES = 3
WARNING_MESSAGE_LINES = 1  # lines read as a bare message when nothing in a region is recognised


class Assembler(TracebackReader, AssertReader, CudaReader, DistributedReader, MessageReader, SanitizerReader, JobReader):
    """Walks the lines of a region once, keeping the state of the record being built."""

    def __init__(self, frames: list[Frame] | None = None) -> None:
        self.out: list[Record] = []
        # `frames`: a traceback's frames already known (a live exception's), so its message lines are read
        # in the context a printed traceback gives them (the op on the failing line)
        self.frames: list[Frame] = list(frames or [])
        self.header = False
        self.chain: str | None = None
        self.exc: PyException | None = None
        self.exc_lines = 0
        self.cuda: CudaError | None = None
        self.cpp: CppException | None = None
        self.san: SanitizerReport | None = None
        self.san_tool: str | None = None
        self.san_check: str | None = None
        self.arch: ArchWarning | None = None
        self.elastic: ElasticFailure | None = None
        self.elastic_root = False
        self.elastic_table = False  # inside torchrun's failure table: its field lines are read
        self.asserts = 0
        self.pending_warning: tuple[Line, str] | None = None
        self.tb_start = 0
        self.wrapper_at: int | None = None
        self.expect_code = False  # a plain `File "...", line N` frame was just read: its source line follows
        self.free_code: str | None = None  # an indented line read outside any traceback: maybe the failing source line
        self.plain_frames = False  # the frames read so far are Python's plain ones (not IPython's with context lines)
        self.fatal: PyException | None = None  # the last `Fatal Python error`, whose thread dump follows it
        self.dump_thread: str | None = None  # inside a fatal-error dump: "current" (the error's frames) or "other"

    def run(self, lines: list[Line]) -> list[Record]:
        for line in (piece for whole in lines for piece in unglue(whole)):
            self.line(line)
            # (an exception whose message is complete, a warning's one line, takes no more lines: it is no context)
            done = self.exc is None or self.exc_lines >= self._message_limit()
            self.free_code = line.text.strip() if line.text[:1].isspace() and done and not self.frames else None
        self._close_exc()
        if not self.out and lines:  # no format recognised: the last lines may still be an error's message
            tail = lines[-FALLBACK_LINES:]
            self.out.append(
                PyException(
                    first_line=tail[0].no,
                    last_line=tail[-1].no,
                    raw="\n".join(t.text for t in tail),
                    rank=tail[-1].rank,
                    time=tail[-1].time,
                    exc_type="",
                    message="\n".join(t.text.strip() for t in tail),
                )
            )
        if self.frames:  # a traceback cut off before its exception line still locates user code
            last = lines[-1] if lines else Line(0, "")
            # ... and when its last line raises a literal (`raise AssertionError("Torch not compiled with C`),
            # that literal is the error it was about to print, however much of it was pasted
            exc_type, message = raised_literal(self.frames[-1].code or "") or ("", "")
            self.out.append(
                PyException(
                    first_line=self.tb_start or last.no,
                    last_line=last.no,
                    exc_type=exc_type,
                    message=message,
                    frames=self.frames,
                    has_header=self.header,
                )
            )
        return self.out

    # -- dispatch --------------------------------------------------------------------------------
    def line(self, line: Line) -> None:
        text = line.text
        san = anchors("sanitizer").starts(text, 1)
        if san:
            self._close_exc()
            self.sanitizer(line, text[san[0] :])
            return
        m = _SAN_TOOL_OPT.search(text) or _SAN_CMD.search(text)
        if m:
            self.san_tool = m.group(1)
            if m.lastindex and m.lastindex >= 2:
                self.san_check = m.group(2)
        stripped = text.strip()
        # a translated page may have lost the word `Assertion`: a kernel file with block/thread coordinates is one
        if (_ASSERT_HINT.search(text) and ("block" in text or "Assertion failed" in text)) or (
            "block" in text and _COORD.search(text) and _FUZZY_FILE.search(text)
        ):
            if self.assertion(line):
                return
        if self.exc is not None and PROGRESS_BAR.search(text):
            self._close_exc()  # the error's message has ended: the training output goes on
        if self.pending_warning is not None:
            self._warning_message(line)
        if line_start("traceback").match(stripped):
            self.traceback(line)
        elif self.expect_code and self.exc is None and self.frames and stripped and not set(stripped) <= _CARETS:
            self.frames[-1].code = stripped  # the source line Python prints under `File ..., line N`
            self.expect_code = False
        elif self.exc is None and self.plain_frames and self.frames and self.frames[-1].code and stripped and not set(stripped) <= _CARETS:
            # after a plain frame and its source line, a line that is neither is the exception line
            # without its `Type: ` (only the message was pasted) ...
            literal = raised_literal(self.frames[-1].code or "")
            n = min(MIN_CUT_MESSAGE, len(literal[1])) if literal else 0
            if literal and n and stripped[:n] != literal[1][:n]:
                # ... unless the frame raises a literal this line is not: the paste was cut before the error
                # line and other output follows; the literal is the error it was about to print
                self._start_exc(line, *literal)
                self.exc_lines = MAX_MESSAGE_LINES
            else:
                self._start_exc(line, "", stripped)
        elif self.exc is not None and self.exc_lines < self._message_limit() and stripped and self._same_rank(line):
            self.exc.message += "\n" + stripped
            self.exc.last_line = line.no
            self.exc_lines += 1
        if anchors("cuda_error").starts(text, 1):
            self.cuda_line(line)
        if may_hold("oom", text):
            self.oom(line)
        if anchors("distributed").starts(text, 1):
            self.distributed(line)
        if self.elastic_table or anchors("elastic", "table_head").starts(text, 1):
            self.elastic_line(line)
        self.job_line(line)
        self.messages(line, text)

    def _message_limit(self) -> int:
        """How many following lines an open exception's message may take: a warning's is one line and the
        `warnings.warn(...)` source under it, so the log lines after it are not its message."""
        assert self.exc is not None
        return WARNING_MESSAGE_LINES if self.exc.exc_type.endswith("Warning") else MAX_MESSAGE_LINES

    def _same_rank(self, line: Line) -> bool:
        """Interleaved ranks: another rank's line never continues this rank's message."""
        assert self.exc is not None
        return line.rank is None or self.exc.rank is None or line.rank == self.exc.rank


def unglue(line: Line) -> list[Line]:
    """A line holding the start of a line kind that tools print on a line of its own (`terminate called
    after ...`, `what():`, a `Traceback` header) after other text: a paste lost its newlines, so it is
    read as the lines it was. Where those kinds start is each grammar's (`// own line:`)."""
    text = line.text
    cuts: set[int] = set()
    for g in GRAMMARS:
        a = own_line(g)
        found = [k for k in a.starts(text, 8) if k > 0 and not text[:k].isspace()] if a is not None else []
        if found and parse(g, text) is None:  # `Original Traceback (...)` is one line of its own kind, not two
            cuts.update(found)
    if not cuts:
        return [line]
    bounds = [0, *sorted(cuts), len(text)]
    return [line._replace(text=text[a:b].rstrip()) for a, b in itertools.pairwise(bounds) if text[a:b].strip()]
