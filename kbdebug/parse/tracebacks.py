"""Python tracebacks: the header, plain and IPython frames with their source lines, chained
exceptions, warnings, and the exception line (or its message alone, when the type was not pasted)."""

from __future__ import annotations

import re

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at, to_int
from kbdebug.parse.grammar import first_alt, parse, token
from kbdebug.records import Frame, PyException

MAX_MESSAGE_LINES = 30
_EXC_START = re.compile(
    r"^\s*(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning|Interrupt|Failed|Failure|Exit|Iteration)(?::|\s*$)"
    r"|(?:Original )?Traceback|File |During handling|The above exception|(?:[A-Za-z]:)?[^:\s]+\.py:\d+: \w+Warning)"
)
_IPY_ARROW = re.compile(r"^-*>\s*\d")
_IPY_FRAME = re.compile(r"^(?:~|/|[A-Za-z]:\\|<ipython-input|Cell In\s*\[)")
_IPY8_FRAME = re.compile(r"^\s*File\s+([^\s\"]+?\.py):(\d+)(?:,\s*in\s+([^\s(]+))?")
_CARETS = frozenset("^~ ")


class TracebackReader(State):
    def traceback(self, line: Line) -> bool:
        text = line.text.strip()
        self.expect_code = False
        m8 = _IPY8_FRAME.match(text)
        if m8:
            self._close_exc()
            self.plain_frames = False
            self.frames.append(Frame(file=m8.group(1), line=int(m8.group(2)), function=m8.group(3)))
            return True
        tree = parse("traceback", text)
        if tree is None:
            if self.exc is not None and self.exc_lines < MAX_MESSAGE_LINES:
                self.exc.message += "\n" + text
                self.exc_lines += 1
            return False
        alt = first_alt(tree)
        kind = alt.data
        if kind in ("header", "frame", "ipython_frame") and not self.frames:
            self.tb_start = line.no
        if kind == "header":
            self._close_exc()
            self.frames, self.header = [], True
            if text.startswith("Original"):  # a DataLoader worker / replica re-raise: the inner one is the cause
                self.wrapper_at = next((i for i in range(len(self.out) - 1, -1, -1) if isinstance(self.out[i], PyException)), None)
        elif kind == "frame":
            self._close_exc()
            name = (token(alt, "FILENAME") or '""')[1:-1]
            self.frames.append(Frame(file=name, line=to_int(token(alt, "INT")), function=token(alt, "FUNCNAME")))
            self.expect_code = self.plain_frames = True
        elif kind == "ipython_frame":
            self._close_exc()
            self.plain_frames = False
            # IPython 8 prints `Cell In[7], line 3[, in f(...)]`; older ones the line on the `---->` arrow
            name = token(alt, "IPY_FILE") or token(alt, "CELL") or ""
            self.frames.append(Frame(file=name, line=to_int(token(alt, "INT")), function=token(alt, "FUNCNAME")))
        elif kind == "ipython_arrow":
            if self.frames:
                self.frames[-1].line = to_int(token(alt, "INT"))
                self.frames[-1].code = (token(alt, "CODE") or "").strip() or None
        elif kind == "chain":
            self._close_exc()
            self.chain = "cause" if token(alt, "CAUSE") else "context"
        elif kind == "caret":
            pass
        elif kind == "warning":
            self._close_exc()
            msg = (token(alt, "MESSAGE") or "").strip()
            if msg:
                self._start_exc(line, token(alt, "EXC_TYPE") or "Warning", msg)
            else:
                self.pending_warning = (line, token(alt, "EXC_TYPE") or "Warning")
        elif kind == "exception":
            exc_type = token(alt, "EXC_TYPE") or (token(alt, "EXC_TYPE_BARE") or "").strip()
            msg = (token(alt, "MESSAGE") or "").strip()
            if self.exc is not None and not self.frames and self.exc_lines < MAX_MESSAGE_LINES and exc_type.endswith("Warning"):
                return False
            self._close_exc()
            self._start_exc(line, exc_type, msg)
        return True

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
            self._reread_message(self.exc)
            if self.wrapper_at is not None:  # put the original exception before its wrapper: its facts win
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
            line = Line(exc.first_line, folded, exc.rank)
            before = len(self.out)
            if ("oom", exc.first_line) not in known and "out of memory" in folded:
                self.oom(line)
            if ("message", exc.first_line) not in known:
                self.messages(line, folded)
            if len(self.out) > before:
                return
