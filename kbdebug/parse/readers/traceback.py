"""Python tracebacks: the header, plain and IPython frames with their source lines, chained
exceptions, warnings, and the exception line (or its message alone, when the type was not pasted).
The exception's message may go on over the lines after it; read whole when it is done, it goes to the
formats that read messages (a CUDA OOM wrapped mid-figure, a template split over sentences)."""

from __future__ import annotations

from collections.abc import Sequence

from lark import Token

from kbdebug import _regex_cache
from kbdebug.normalise import Line
from kbdebug.parse.derive import anchors, line_start
from kbdebug.parse.fields import Fields, FieldTransformer, unquote
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, Sink, read_at
from kbdebug.records import Frame, PyException, Record

MAX_MESSAGE_LINES = 30
WARNING_MESSAGE_LINES = 1  # a warning's message is its one line (and the `warnings.warn(...)` source under it)
FALLBACK_LINES = 3  # lines read as a bare message when nothing in a region is recognised
FALLBACK_SPAN = 8  # ... reaching back this far to the line a known message starts on (wrapped, with lines after it)
# tqdm's right bar (its default `| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]`): a
# progress line is the training going on (another rank, another worker), never a line of an error's message
PROGRESS_BAR = _regex_cache.compile(r"\|\s*\d+(?:\.\d+)?[kMGTPEZY]?/(?:\d+(?:\.\d+)?[kMGTPEZY]?|\?) \[[\d:]+<[\d:?]+")
_CARETS = frozenset("^~ ")
# A statement pasted without its indent above the error it raised (`tp = torch.sum(gt * pr)`): an assignment
# from a call, or a `return`/`assert`. Log output is rarely one (`loss = 0.52` calls nothing).
# Read in two linear steps: the statement's head (the names assigned to, or the keyword), then what follows it:
# a call's closing bracket ends the line and a name opens one before it (one regex for both backtracked on a
# long line that ended otherwise).
SOURCE_HEAD = _regex_cache.compile(
    r"^(?:(?:[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*,\s*)*[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[-+*/@%]|//)?=(?!=)\s*(?=[^=\s])"
    r"|(?:return|assert)\s)"
)
_CALL_OPENS = _regex_cache.compile(r"\w\(")


def is_source_line(text: str) -> bool:
    """Whether an unindented line reads as a statement that calls something (see SOURCE_HEAD)."""
    head = SOURCE_HEAD.match(text)
    if head is None:
        return False
    rest = text[head.end() :].rstrip()
    return rest.endswith(")") and _CALL_OPENS.search(rest, 0, len(rest) - 1) is not None


# A Python `except` clause (`except FileNotFoundError:`, `except (KeyError, IndexError) as e:`): code, not an error
_EXCEPT_CLAUSE = _regex_cache.compile(r"^except\b[^:]*:$")
# A c10 warning as PyTorch's C++ side prints it (`[W reducer.cpp:1389] Warning: ...`, since 2.4 with its time:
# `[W1105 10:11:12.123456789 ProcessGroupNCCL.cpp:1168] Warning: ...`): the program went on, so a bare message made
# of such lines is marked ignored, no failure by itself (the destroy_process_group reminder ends every successful
# DDP run), while a CUDA error it reports (`CUDA warning: an illegal memory access was encountered`) is still read
_C10_WARNING = _regex_cache.compile(r"^\[W[^\]]*\.(?:cpp|cu|h|hpp):\d+\]\s*Warning:")
# Any c10 log line (`[E514 10:52:31.000100 ProcessGroupNCCL.cpp:632] ...`): PyTorch's C++ logging, never the continuation
# of a Python exception's message (another rank's watchdog printed under this rank's error)
_C10_LOG = _regex_cache.compile(r"^\[[EWIF][^\]]*\.(?:cpp|cu|h|hpp):\d+\]")
# The line Python prints after a traceback's last frame is `module.Type: message` (traceback.py's
# format_exception_only: the module, unless builtins or __main__, and the qualified name). The grammar's exception
# types are those whose names say so (`...Error`, `...Exception`, ...): a line of free text is no error. Right under
# a plain frame and its source line Python leaves no choice, so there a dotted name whose last part is a class
# (`zipfile.BadZipFile`, `_queue.Empty`, `torch._dynamo.exc.Unsupported`) or one of the lower-case error classes
# of C extensions (`cv2.error`, `struct.error`, `socket.timeout`, `socket.gaierror`) is the exception's type too. A
# dotted name of another kind (`model.fc.weight: torch.Size([10])`, `val.mean_abs_error: 0.12`, a print interleaved
# from another process) is not.
_QUALIFIED_EXC = _regex_cache.compile(r"^((?:[A-Za-z_]\w*\.)+(?:[A-Z]\w*|error|timeout|gaierror|herror))(?::[ \t]+(\S.*)|:?[ \t]*)$")
_FRAMES = ("frame", "ipython_frame", "ipython8_frame", "rich_frame")
_ARROWS = ("ipython_arrow", "rich_arrow")  # the failing line of the frame above, marked


class TracebackTree(FieldTransformer):
    """traceback.lark's tree to the kind of traceback line and its Frame or PyException fields."""

    grammar = "traceback"

    def file(self, children: list[Token]) -> Fields:
        path = str(children[0])  # `"/x/train.py"`, or `x/train.py"` where the paste began inside it
        return {"file": unquote(path, '"') if path.startswith('"') else path.rstrip('"')}

    def chain(self, children: list[Token]) -> Fields:
        return {"chained": "cause" if children[0].type == "CAUSE" else "context"}

    def code(self, children: list[Token]) -> Fields:
        return {"code": str(children[0]).replace("│", " ").strip()}  # rich's indent guides are not code

    def class_name(self, children: list[Token]) -> Fields:  # `'RuntimeError'` in `<class 'RuntimeError'>`
        return {"exc_type": unquote(str(children[0]), "'")}

    def header(self, children: list[Token]) -> Fields:
        return {"original": str(children[0]).startswith("Original")}


class TracebackReader(Reader):
    order = 30  # after the formats that take their lines as their own: those lines are no message

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        # `frames`: a traceback's frames already known (a live exception's), so its message lines are read
        # in the context a printed traceback gives them (the op on the failing line)
        self.frames: list[Frame] = list(frames)
        self.header = False
        self.chain: str | None = None
        self.exc: PyException | None = None
        self.exc_lines = 0
        self.pending_warning: tuple[Line, str] | None = None
        self.tb_start = 0
        self.expect_code = False  # a plain `File "...", line N` frame was just read: its source line follows
        self.free_code: str | None = None  # an indented line read outside any traceback: maybe the failing source line
        self.plain_frames = False  # the frames read so far are Python's plain ones (not IPython's with context lines)
        self.fatal: PyException | None = None  # the last `Fatal Python error`, whose thread dump follows it
        self.dump_thread: str | None = None  # inside a fatal-error dump: "current" (the error's frames) or "other"
        self.original = False  # under `Original Traceback (...)`: the next exception is the one re-raised by the last
        self.ignored = False  # after `Exception ignored in: ...`: the next exception is one Python printed and ignored

    def read(self, line: Line) -> bool:
        text = line.text
        stripped = text.strip()
        if self.exc is not None and PROGRESS_BAR.search(text):
            self._close_exc()  # the error's message has ended: the training output goes on
        if self.pending_warning is not None:
            self._warning_message(line)
        if line_start("traceback").match(stripped):
            self.traceback(line)
        elif self.expect_code and self.exc is None and self.frames and stripped and not set(stripped) <= _CARETS:
            self.frames[-1].code = stripped  # the source line Python prints under `File ..., line N`
            self.expect_code = False
            self._after(line)
            # the program's text, not its output: an error's wording in a string or docstring there (`raise
            # ValueError("... will cause CUDA error: device-side assert triggered")`) is read by no other format
            return True
        elif self.exc is None and self.plain_frames and self.frames and self.frames[-1].code and stripped and not set(stripped) <= _CARETS:
            # after a plain frame and its source line, a line that is neither is the exception line: one whose
            # type the grammar does not know by its name (_QUALIFIED_EXC), or one without its `Type: `
            qualified = _QUALIFIED_EXC.match(stripped)
            if qualified:
                self._start_exc(line, qualified.group(1), qualified.group(2) or "")
            else:
                self._untyped_exception(line, stripped)
        elif self.exc is None and stripped and not text[:1].isspace() and self._message_may_follow() and self.sink.holds_message(line):
            # a message of a known form under a lone source line or IPython's frames (whose context lines are no
            # message): the error pasted without its `Type: `
            self._start_exc(line, "", stripped)
        elif self.exc is not None and self.exc_lines < self._message_limit() and stripped and self._same_rank(line):
            if self._ends_warning(line) or _C10_LOG.match(stripped):
                self._close_exc()
            else:
                self.exc.message += "\n" + stripped
                self.exc.last_line = line.no
                self.exc_lines += 1
        self._after(line)
        return False

    def _untyped_exception(self, line: Line, stripped: str) -> None:
        """The line under a plain frame and its source line, without its `Type: ` (only the message was pasted) ..."""
        literal = raised_literal(self.frames[-1].code or "")
        n = min(MIN_CUT_MESSAGE, len(literal[1])) if literal else 0
        if literal and n and stripped[:n] != literal[1][:n]:
            # ... unless the frame raises a literal this line is not: the paste was cut before the error
            # line and other output follows; the literal is the error it was about to print
            self._start_exc(line, *literal)
            self.exc_lines = MAX_MESSAGE_LINES
        else:  # the message of the literal the frame raises is of the literal's type
            self._start_exc(line, literal[0] if literal and n else "", stripped)

    def _message_may_follow(self) -> bool:
        """After a lone source line (no frame), or after IPython's frames; Python's plain frames are read above."""
        return bool(self.free_code) if not self.frames else not self.plain_frames

    def passed(self, line: Line, ends_messages: bool) -> None:
        if ends_messages:
            self._close_exc()
        self._after(line)

    def _after(self, line: Line) -> None:
        # (an exception whose message is complete, a warning's one line, takes no more lines: it is no context)
        done = self.exc is None or self.exc_lines >= self._message_limit()
        stripped = line.text.strip()
        code = line.text[:1].isspace() or is_source_line(stripped)
        self.free_code = stripped if code and done and not self.frames else None

    def end(self, lines: Sequence[Line]) -> None:
        self._close_exc()
        # a traceback cut off before its exception line whose last line raises a literal (`raise AssertionError("Torch
        # not compiled with C`, `assert a == b, "shapes differ"`): that literal is the error it was about to print,
        # however much of it was pasted
        literal = raised_literal(self.frames[-1].code or "") if self.frames else None
        # no format recognised: the last lines may still be an error's message (never the `except X:` clauses of
        # pasted code, which name a type the code catches, not one it raised)
        if self.sink.empty and literal is None:
            self._bare_message(lines)
        if self.frames:  # ... and such a traceback still locates user code
            last = lines[-1] if lines else Line(0, "")
            exc_type, message = literal or ("", "")
            self.sink.emit(
                PyException(
                    first_line=self.tb_start or last.no,
                    last_line=last.no,
                    exc_type=exc_type,
                    message=message,
                    frames=self.frames,
                    has_header=self.header,
                )
            )

    def _bare_message(self, lines: Sequence[Line]) -> None:
        """The last lines as an error's message, when nothing in the region was recognised (`_fallback_tail`)."""
        tail = [t for t in _fallback_tail(lines) if not _EXCEPT_CLAUSE.match(t.text.strip())]
        if not tail:
            return
        bare = PyException(
            first_line=tail[0].no,
            last_line=tail[-1].no,
            raw="\n".join(t.text for t in tail),
            rank=tail[-1].rank,
            time=tail[-1].time,
            exc_type="",
            message="\n".join(t.text.strip() for t in tail),
            # a c10 warning's message, with the log lines after it or before it (`saved checkpoint ...` above the
            # destroy_process_group reminder that ends a successful DDP run): no failure by itself
            ignored=any(_C10_WARNING.match(t.text.strip()) for t in tail),
        )
        self._reread_message(bare)  # a template wrapped over its lines is read whole
        self.sink.emit(bare)

    @classmethod
    def link(cls, records: list[Record]) -> None:
        """An exception printed under `Original Traceback (most recent call last):` (a DataLoader worker's, a
        replica's) is the cause of the exception before it, which re-raised it: it goes first, so its facts
        win, and it was raised in that exception's worker."""
        for exc in [r for r in records if isinstance(r, PyException) and r.original]:
            at = records.index(exc)
            wrapper = next((i for i in range(at - 1, -1, -1) if isinstance(records[i], PyException)), None)
            if wrapper is not None:
                exc.worker = records[wrapper].worker  # type: ignore[attr-defined]
                records.insert(wrapper, records.pop(at))

    def _message_limit(self) -> int:
        """How many following lines an open exception's message may take: a warning's is one line and the
        `warnings.warn(...)` source under it, so the log lines after it are not its message."""
        assert self.exc is not None
        return WARNING_MESSAGE_LINES if self.exc.exc_type.endswith("Warning") else MAX_MESSAGE_LINES

    def _ends_warning(self, line: Line) -> bool:
        """The line after a warning's is its message's second line or its source line, unless it reads as an
        error of its own (an out-of-memory message printed right after a DataLoader's warning): then the
        warning is over, and that line is not read as the warning's."""
        assert self.exc is not None
        return self.exc.exc_type.endswith("Warning") and not line.text[:1].isspace() and self.sink.holds_message(line)

    def _same_rank(self, line: Line) -> bool:
        """Interleaved ranks: another rank's line never continues this rank's message, nor a rank's line the message of
        an error printed without one (a launcher's own, or a rank's printed unprefixed before the others' watchdog)."""
        assert self.exc is not None
        return line.rank is None or line.rank == self.exc.rank

    def traceback(self, line: Line) -> bool:
        text = line.text.strip()
        self.expect_code = False
        tree = parse("traceback", text)
        if tree is None:  # a line that starts as a traceback's does not read as one: the open message's next line
            if self.exc is not None and self.exc_lines < self._message_limit() and self._same_rank(line):
                self.exc.message += "\n" + text
                self.exc_lines += 1
            return False
        f = TracebackTree().read(tree)
        kind = f.pop("template")
        if self._fatal_dump(line, kind, f):
            return True
        if kind in ("header", *_FRAMES) and not self.frames:
            self.tb_start = line.no
        if kind == "ignored":
            self._close_exc()
            self.frames, self.header, self.chain, self.ignored = [], False, None, True
        elif kind == "header":
            self._close_exc()
            self.frames, self.header, self.plain_frames = [], True, False
            self.original = bool(f["original"])  # a DataLoader worker / replica re-raise: the inner one is the cause
        elif kind in _FRAMES:
            self._close_exc()
            # IPython 8 prints `Cell In[7], line 3[, in f(...)]`; older ones the line on the `---->` arrow
            self.frames.append(Frame(file=f.get("file", ""), line=f.get("line"), function=f.get("function")))
            self.expect_code = self.plain_frames = kind == "frame"
        elif kind in _ARROWS:
            if self.frames:
                self.frames[-1].line = f["line"]
                self.frames[-1].code = f.get("code") or None
        elif kind == "chain":
            self._close_exc()
            self.chain = f["chained"]
        elif kind == "logged_exception":  # the frame it names is the only one the log has
            self._close_exc()
            if f.get("file"):
                self.frames = [Frame(file=f["file"], line=f.get("line"))]
            self._start_exc(line, f["exc_type"], f.get("message", ""))
        elif kind == "ide_exception":  # the message follows on its own line, as a warning's does
            self._close_exc()
            self.pending_warning = (line, f["exc_type"])
        elif kind == "warning":
            self._close_exc()
            if f.get("message"):
                self._start_exc(line, f["exc_type"], f["message"])
            else:
                self.pending_warning = (line, f["exc_type"])
        elif kind == "exception":
            exc_type, msg = f["exc_type"], f.get("message", "")
            if self.exc is not None and not self.frames and self.exc_lines < MAX_MESSAGE_LINES and exc_type.endswith("Warning"):
                return False
            self._close_exc()
            self._start_exc(line, exc_type, msg)
            assert self.exc is not None
            # `Type:` with nothing after it: the message was written as a paragraph (its text begins with a newline),
            # printed from the next line; a bare `Type` has no message, whatever lines follow it
            self.exc.paragraph = not msg and line.text.rstrip().endswith(":")
        return True

    def _fatal_dump(self, line: Line, kind: str, f: Fields) -> bool:
        """Python's fatal-error dump: `Fatal Python error: MSG` is the error, and the frames of the thread
        it names current (printed innermost first, after it) are its traceback. Another thread's frames
        are not the error's; any other traceback line ends the dump."""
        if kind == "fatal":
            self._close_exc()
            self.frames, self.header, self.chain = [], False, None
            self.fatal = PyException(**read_at(line), exc_type="Fatal Python error", message=f.get("message", ""))
            self.sink.emit(self.fatal)
            self.dump_thread = None
            return True
        if kind == "thread":
            self._close_exc()
            self.frames = []
            self.dump_thread = "current" if line.text.strip().startswith("Current") and self.fatal is not None else "other"
            return True
        if kind in _FRAMES and self.dump_thread is not None:
            if self.dump_thread == "current" and self.fatal is not None:
                self.fatal.frames.insert(0, Frame(file=f.get("file", ""), line=f.get("line"), function=f.get("function")))
                self.fatal.last_line = line.no
            return True
        self.dump_thread = None
        return False

    def _start_exc(self, line: Line, exc_type: str, msg: str) -> None:
        if not self.frames and self.free_code:  # only the failing source line was pasted above the error
            self.frames = [Frame(file="<unknown>", code=self.free_code)]
        self.exc = PyException(
            **read_at(line),
            exc_type=exc_type,
            message=msg,
            frames=self.frames,
            chained=self.chain,  # type: ignore[arg-type]
            has_header=self.header,
            original=self.original,
            ignored=self.ignored,
        )
        self.frames, self.header, self.chain, self.exc_lines, self.original, self.ignored = [], False, None, 0, False, False
        self.plain_frames = False

    def _warning_message(self, line: Line) -> None:
        assert self.pending_warning is not None
        wline, wtype = self.pending_warning
        self.pending_warning = None
        self._start_exc(wline, wtype, line.text.strip())
        self.exc_lines = 0

    def _close_exc(self) -> None:
        if self.exc is not None:
            _complete_cut_message(self.exc)
            self._reread_message(self.exc)
            self.sink.emit(self.exc)
            self.exc = None
        self.pending_warning = None

    def _reread_message(self, exc: PyException) -> None:
        """Read a message again as one line when a console split it (sentences on their own lines, a
        wrap mid-number) or when its exception type was not pasted: the templates see it whole."""
        if "\n" not in exc.message and exc.exc_type:
            return
        forms = dict.fromkeys((exc.folded_message, "".join(exc.message.split("\n"))))
        self.sink.reread([Line(exc.first_line, folded, exc.rank, exc.time) for folded in forms])


def _fallback_tail(lines: Sequence[Line]) -> Sequence[Line]:
    """The last lines, read as a bare message when nothing else was recognised: FALLBACK_LINES of them, or from the
    line a known message starts on when that is further back (a message pasted without its type, wrapped, and
    followed by a launcher's lines: `srun: error: ... Exited with exit code 1`)."""
    start = max(len(lines) - FALLBACK_LINES, 0)
    for k in range(start - 1, max(len(lines) - FALLBACK_SPAN, 0) - 1, -1):
        if anchors("messages").starts(lines[k].text, 1):
            return lines[k:]
    return lines[start:]


_RAISE_LITERAL = _regex_cache.compile(r"""^raise\s+([A-Za-z_][\w.]*)\(\s*[rRuU]?(["'])((?:(?!\2)[^\\]|\\.)*)""")
# `assert COND, "message"`: the message is the line's last element (a condition may hold strings and commas)
_ASSERT_LITERAL = _regex_cache.compile(r"""^assert\s.+,\s*[rRuU]?(["'])((?:(?!\1)[^\\]|\\.)*)\1?\s*$""")


def raised_literal(code: str) -> tuple[str, str] | None:
    """`raise ValueError("y and y_pred differ")`, `assert a.shape == b.shape, "shapes differ"`: the type and the
    message a source line raises, when the message is a plain literal (an f-string's text is not the message);
    the literal may be cut off."""
    code = code.strip()
    m = _RAISE_LITERAL.match(code)
    if m:
        return m.group(1), m.group(3)
    m = _ASSERT_LITERAL.match(code)
    return ("AssertionError", m.group(2)) if m else None


_STRING = _regex_cache.compile(
    r"""(?<![\w"'])(?:[rRuU]?)("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
)  # no f-strings: their text is not the message
MIN_CUT_MESSAGE = 12


def _complete_cut_message(exc: PyException) -> None:
    """A paste cut off mid-message, raised by a line that holds the message as a literal (`assert ...,
    "'input' and 'target' must have the same shape"`, `raise ValueError("...")`): the message is the
    literal's text. Only a strict prefix of a literal counts, so a message with values in it is kept."""
    message = exc.message.strip()
    code = exc.frames[-1].code if exc.frames else None
    if not code or len(message) < MIN_CUT_MESSAGE or "\n" in message:
        return
    for m in _STRING.finditer(code):
        text = m.group(1)[1:-1]
        if text.startswith(message) and len(text) > len(message):
            exc.message = text
            return
