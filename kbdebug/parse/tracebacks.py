"""Python tracebacks: the header, plain and IPython frames with their source lines, chained
exceptions, warnings, and the exception line (or its message alone, when the type was not pasted)."""

from __future__ import annotations

import re

from lark import Token

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at
from kbdebug.parse.derive import may_hold
from kbdebug.parse.fields import Fields, FieldTransformer, unquote
from kbdebug.parse.grammar import parse
from kbdebug.records import Frame, PyException

MAX_MESSAGE_LINES = 30
# tqdm's right bar (its default `| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]`): a
# progress line is the training going on (another rank, another worker), never a line of an error's message
PROGRESS_BAR = re.compile(r"\|\s*\d+(?:\.\d+)?[kMGTPEZY]?/(?:\d+(?:\.\d+)?[kMGTPEZY]?|\?) \[[\d:]+<[\d:?]+")
_CARETS = frozenset("^~ ")
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


class TracebackReader(State):
    def traceback(self, line: Line) -> bool:
        text = line.text.strip()
        self.expect_code = False
        tree = parse("traceback", text)
        if tree is None:
            if self.exc is not None and self.exc_lines < MAX_MESSAGE_LINES:
                self.exc.message += "\n" + text
                self.exc_lines += 1
            return False
        f = TracebackTree().read(tree)
        kind = f.pop("template")
        if self._fatal_dump(line, kind, f):
            return True
        if kind in ("header", *_FRAMES) and not self.frames:
            self.tb_start = line.no
        if kind == "header":
            self._close_exc()
            self.frames, self.header, self.plain_frames = [], True, False
            if f["original"]:  # a DataLoader worker / replica re-raise: the inner one is the cause
                self.wrapper_at = next((i for i in range(len(self.out) - 1, -1, -1) if isinstance(self.out[i], PyException)), None)
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
        return True

    def _fatal_dump(self, line: Line, kind: str, f: Fields) -> bool:
        """Python's fatal-error dump: `Fatal Python error: MSG` is the error, and the frames of the thread
        it names current (printed innermost first, after it) are its traceback. Another thread's frames
        are not the error's; any other traceback line ends the dump."""
        if kind == "fatal":
            self._close_exc()
            self.frames, self.header, self.chain = [], False, None
            self.fatal = PyException(**read_at(line), exc_type="Fatal Python error", message=f.get("message", ""))
            self.out.append(self.fatal)
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
        )
        self.frames, self.header, self.chain, self.exc_lines = [], False, None, 0
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
            if self.wrapper_at is not None:  # put the original exception before its wrapper: its facts win
                self.exc.worker = getattr(self.out[self.wrapper_at], "worker", None)
                self.out.insert(self.wrapper_at, self.exc)
                self.wrapper_at = None
            else:
                self.out.append(self.exc)
            self.exc = None
        self.pending_warning = None

    def _reread_message(self, exc: PyException) -> None:
        """Read a message again as one line when a console split it (sentences on their own lines, a
        wrap mid-number) or when its exception type was not pasted: the templates see it whole."""
        if "\n" not in exc.message and exc.exc_type:
            return
        known = {(r.kind, r.first_line) for r in self.out[-8:]}
        for folded in dict.fromkeys((exc.folded_message, "".join(exc.message.split("\n")))):
            line = Line(exc.first_line, folded, exc.rank, exc.time)
            before = len(self.out)
            if may_hold("oom", folded):  # read whole, a message wrapped mid-figure says more than its first line
                self.oom(line)
                if ("oom", exc.first_line) in known and self._keep_fuller_oom(exc.first_line):
                    return
            if ("message", exc.first_line) not in known:
                self.messages(line, folded)
            if len(self.out) > before:
                return

    def _keep_fuller_oom(self, first_line: int) -> bool:
        """Of the OOM read from the message's first line and the one read from the whole message, keep the one
        with more figures. True when the whole message's reading was kept."""
        same = [i for i, r in enumerate(self.out) if r.kind == "oom" and r.first_line == first_line]
        if len(same) < 2:
            return False
        first, whole = same[0], same[-1]
        if len(self.out[whole].model_dump(exclude_none=True)) > len(self.out[first].model_dump(exclude_none=True)):
            self.out[first] = self.out.pop(whole)
            return True
        self.out.pop(whole)
        return False


_RAISE_LITERAL = re.compile(r"""^raise\s+([A-Za-z_][\w.]*)\(\s*[rRuU]?(["'])((?:(?!\2)[^\\]|\\.)*)""")


def raised_literal(code: str) -> tuple[str, str] | None:
    """`raise ValueError("y and y_pred differ")`: the type and the message a source line raises, when the
    message is a plain literal (an f-string's text is not the message); the literal may be cut off."""
    m = _RAISE_LITERAL.match(code.strip())
    return (m.group(1), m.group(3)) if m else None


_STRING = re.compile(r"""(?<![\w"'])(?:[rRuU]?)("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")  # no f-strings: their text is not the message
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
