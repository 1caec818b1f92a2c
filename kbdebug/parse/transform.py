"""Grammar trees to records, and the line-by-line assembly of multi-line records."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from lark import Tree

from kbdebug.frames import basename
from kbdebug.parse.grammar import anchors, first_alt, parse, subtree, token, tokens
from kbdebug.records import (
    ArchWarning,
    CppException,
    CudaError,
    ElasticFailure,
    Frame,
    KernelAssert,
    LibraryError,
    NcclEvent,
    Oom,
    PyException,
    Record,
    SanitizerFrame,
    SanitizerReport,
    SanitizerSummary,
    TorchMessage,
)
from kbdebug.scan import Line

MAX_ASSERT_PARSES = 200  # beyond this many assert lines, the rest are counted by regex only
MAX_MESSAGE_LINES = 30
FALLBACK_LINES = 3  # lines read as a bare message when nothing in a region is recognised

_ASSERT_HINT = re.compile(r"Assertion|assert", re.I)
_COORD = re.compile(
    r"block\s*[:：]\s*\[\s*(\d+)\s*[,，]\s*(\d+)\s*[,，]\s*(\d+)\s*\]\s*[,，]\s*"
    r"thread\s*[:：]\s*\[\s*(\d+)\s*[,，]\s*(\d+)\s*[,，]\s*(\d+)\s*\]"
)
_FUZZY_FILE = re.compile(r"([\w\-]+\.(?:cuh?|hpp|h|cpp|cc|py))(?::(\d+))?")
_FUZZY_COND = re.compile(r"Assertion\s*[`'\"‘“](.+?)(?:[`'\"’”]\s*failed|$)")
_QUOTED_COND = re.compile(r"[`‘“]([^`’”]{3,}?)[`'’”]")  # the condition of a translated assert line, without `Assertion`
_FUZZY_LINE = re.compile(r":(\d+)(?=[,/\]:]|$)")
_EXC_START = re.compile(
    r"^\s*(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning|Interrupt|Failed|Failure|Exit|Iteration)(?::|\s*$)"
    r"|(?:Original )?Traceback|File |During handling|The above exception|(?:[A-Za-z]:)?[^:\s]+\.py:\d+: \w+Warning)"
)
_IPY_ARROW = re.compile(r"^-*>\s*\d")
_IPY_FRAME = re.compile(r"^(?:~|/|[A-Za-z]:\\|<ipython-input|Cell In\s*\[)")
_IPY8_FRAME = re.compile(r"^\s*File\s+([^\s\"]+?\.py):(\d+)(?:,\s*in\s+([^\s(]+))?")
_TABLE_KEY = re.compile(r"^\s*(?:\[\d+\]|time|host|rank|local_rank|exitcode|error_file|traceback)\s*:")
_CUDA_HINT = re.compile(
    r"CUDA error|HIP error|cuda runtime error|THCudaCheck|cuda error \d|Search for `|asynchronously reported"
    r"|CUDA_LAUNCH_BLOCKING|TORCH_USE_(?:CUDA|HIP)_DSA|CUBLAS_STATUS|CUDNN_STATUS|terminate called"
    r"|what\(\):|Exception raised from|^\s*frame #\d+",
    re.I,
)
_DIST_HINT = re.compile(r"NCCL|Watchdog|watchdog|Root Cause|Other Failures")
_CARETS = frozenset("^~ ")
_INDEX_OPS = re.compile(r"\b(gather|scatter(?:_add|_reduce)?_?|take_along_dim|index_select|index_put_?|index_add_?|embedding)\(")
_TOOLKIT_PATH = re.compile(r"(?:^|[\\/])cuda[^\\/]*[\\/](?:[^\\/]+[\\/])*include[\\/]|(?:^|[\\/])sm_\d+_intrinsics", re.I)
_SAN_TOOL_OPT = re.compile(r"(compute-sanitizer|cuda-memcheck)\b[^\n]*?--tool[ =](\w+)")
_SAN_CMD = re.compile(r"(?:^|[\s$])(compute-sanitizer|cuda-memcheck)\s")


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return None


def _triple(text: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in re.findall(r"\d+", text)[:3])
    return (a, b, c)


# -- kernel asserts ------------------------------------------------------------------------------
def kernel_assert(tree: Tree, line: Line) -> KernelAssert:
    alt = first_alt(tree)
    path = token(alt, "PATH") or "unknown"
    lineno = _int(token(alt, "LINENO"))
    func = token(alt, "FUNC")
    triples = [_triple(" ".join(tokens(t))) for t in alt.find_data("triple")]
    cond = (token(alt, "QUOTED_COND") or "").strip()
    cond = cond[1:-1] if len(cond) >= 2 and cond[-1] in "`'\"’”" else cond[1:]
    return KernelAssert(
        first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank, path=path,
        kernel_file=basename(path), kernel_line=lineno, function=func.strip() if func else None,
        block=triples[0] if triples else None, thread=triples[1] if len(triples) > 1 else None,
        condition=cond.strip(), message=token(alt, "MESSAGE"),
        source="printf" if alt.data == "assert_line" else "printf",
    )


def clean_condition(cond: str) -> str:
    """Strip what interleaved device printf glued onto a condition."""
    cond = cond.strip()
    quotes = [m.end() for m in re.finditer(r'"[^"]*"', cond)]
    if quotes and quotes[-1] < len(cond):
        cond = cond[: quotes[-1]]
    cond = re.split(r"\s*[:：]\s*block\s*[:：]|\]\s*,\s*thread", cond)[0]
    return cond.strip()


def fuzzy_assert(line: Line) -> KernelAssert | None:
    """Best effort for lines mangled by concurrent device printf: file, condition, coordinates."""
    text = line.text.replace("【", "[").replace("】", "]")
    cond = _FUZZY_COND.search(text) or _QUOTED_COND.search(text)
    files = _FUZZY_FILE.findall(text)
    coords = _COORD.search(text)
    if not files or not (cond or coords):
        return None
    kernel_file, lineno = files[0][0], None
    for name, num in files:
        if num:
            kernel_file, lineno = name, int(num)
            break
    return KernelAssert(
        first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank, path=kernel_file,
        kernel_file=kernel_file, kernel_line=lineno, condition=clean_condition(cond.group(1)) if cond else "",
        block=tuple(int(x) for x in coords.groups()[:3]) if coords else None,  # type: ignore[arg-type]
        thread=tuple(int(x) for x in coords.groups()[3:]) if coords else None,  # type: ignore[arg-type]
        source="fuzzy",
    )


def group_asserts(records: list[Record]) -> list[Record]:
    """Collapse the one-line-per-thread assert flood into one record per site."""
    out: list[Record] = []
    groups: dict[tuple, KernelAssert] = {}
    blocks: dict[tuple, set] = {}
    threads: dict[tuple, set] = {}
    fuzzy: list[KernelAssert] = []
    for rec in records:
        if not isinstance(rec, KernelAssert):
            out.append(rec)
            continue
        if rec.source == "fuzzy":
            fuzzy.append(rec)
            continue
        key = (rec.kernel_file, rec.kernel_line, rec.condition)
        if key not in groups:
            groups[key] = rec.model_copy()
            blocks[key], threads[key] = set(), set()
            out.append(groups[key])
        else:
            g = groups[key]
            g.count += 1
            g.last_line = rec.last_line
        blocks[key].add(rec.block)
        threads[key].add((rec.block, rec.thread))
    for key, g in groups.items():
        g.distinct_blocks = len(blocks[key] - {None}) or 1
        g.distinct_threads = len(threads[key]) or 1
    if fuzzy:
        merged = _merge_fuzzy(fuzzy, groups)
        if merged is not None:
            out.insert(_first_index(out, merged.first_line), merged)
    return out


def _first_index(records: list[Record], first_line: int) -> int:
    for i, rec in enumerate(records):
        if rec.first_line > first_line:
            return i
    return len(records)


def _merge_fuzzy(fuzzy: list[KernelAssert], groups: dict[tuple, KernelAssert]) -> KernelAssert | None:
    conds = Counter(f.condition for f in fuzzy if f.condition)
    files = Counter(f.kernel_file for f in fuzzy)
    kernel_file = files.most_common(1)[0][0]
    cond = conds.most_common(1)[0][0] if conds else ""
    for g in groups.values():
        if g.kernel_file == kernel_file and g.condition == cond:
            g.count += len(fuzzy)
            return None
    lines = Counter(f.kernel_line for f in fuzzy if f.kernel_line is not None)
    kernel_line = lines.most_common(1)[0][0] if lines else None
    if kernel_line is None:
        # interleaved printf: the line number survives only as `:N` fragments
        frags = Counter(int(n) for f in fuzzy for n in _FUZZY_LINE.findall(f.raw))
        if frags:
            num, seen = frags.most_common(1)[0]
            kernel_line = num if seen >= 3 else None
    first = fuzzy[0]
    return first.model_copy(update={
        "kernel_file": kernel_file, "path": kernel_file, "kernel_line": kernel_line, "condition": cond,
        "count": len(fuzzy), "last_line": fuzzy[-1].last_line, "block": first.block, "thread": first.thread,
    })


# -- sanitizer -----------------------------------------------------------------------------------
_LOC_NEW = re.compile(r"^(?P<func>.+?)(?P<pc>\+0x[0-9a-fA-F]+)(?: in (?P<file>.+?):(?P<line>\d+))?\s*$")
_LOC_OLD_FILE = re.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in (?P<file>(?:[A-Za-z]:)?[^:]+?):(?P<line>\d+):(?P<func>.+)$")
_LOC_OLD = re.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in (?P<func>.+?)\s*$")
_LOC_COLON = re.compile(r"^(?P<func>.+?):(?P<pc>0x[0-9a-fA-F]+)(?: in (?P<file>.+?):(?P<line>\d+))?$")
_LOC_FILEFUNC = re.compile(r"^(?P<file>(?:[A-Za-z]:)?[^:\s]+?):(?P<line>\d+):(?P<func>.+?)(?: \(.*: 0x[0-9a-f]+\))?$")
_LOC_OLDFRAME = re.compile(r"^(?P<func>.+?) \((?:.*) : (?P<pc>0x[0-9a-fA-F]+)\)$")
_HAZARDS = re.compile(r"\s*\[(\d+) hazards?\]\s*$")


def location(text: str) -> SanitizerFrame:
    text = text.strip()
    hz = _HAZARDS.search(text)
    if hz:
        text = text[: hz.start()]
    for rx in (_LOC_OLD_FILE, _LOC_NEW, _LOC_COLON, _LOC_FILEFUNC, _LOC_OLD, _LOC_OLDFRAME):
        m = rx.match(text)
        if m:
            d = m.groupdict()
            return SanitizerFrame(function=(d.get("func") or "").strip() or None, file=d.get("file"),
                                  line=_int(d.get("line")), module=d.get("pc"))
    return SanitizerFrame(function=text or None)


class Assembler:
    """Walks the lines of a region once, keeping the state of the record being built."""

    def __init__(self) -> None:
        self.out: list[Record] = []
        self.frames: list[Frame] = []
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
        self.asserts = 0
        self.pending_warning: tuple[Line, str] | None = None
        self.tb_start = 0
        self.wrapper_at: int | None = None
        self.expect_code = False  # a plain `File "...", line N` frame was just read: its source line follows
        self.free_code: str | None = None  # an indented line read outside any traceback: maybe the failing source line
        self.plain_frames = False  # the frames read so far are Python's plain ones (not IPython's with context lines)

    def run(self, lines: list[Line]) -> list[Record]:
        for line in lines:
            self.line(line)
            self.free_code = line.text.strip() if line.text[:1].isspace() and self.exc is None and not self.frames else None
        self._close_exc()
        if not self.out and lines:  # no format recognised: the last lines may still be an error's message
            tail = lines[-FALLBACK_LINES:]
            self.out.append(PyException(first_line=tail[0].no, last_line=tail[-1].no, raw="\n".join(t.text for t in tail),
                                        rank=tail[-1].rank, exc_type="", message="\n".join(t.text.strip() for t in tail)))
        if self.frames:  # a traceback cut off before its exception line still locates user code
            last = lines[-1] if lines else Line(0, "")
            self.out.append(PyException(first_line=self.tb_start or last.no, last_line=last.no, exc_type="", message="",
                                        frames=self.frames, has_header=self.header))
        return self.out

    # -- dispatch --------------------------------------------------------------------------------
    def line(self, line: Line) -> None:
        text = line.text
        if "=========" in text:
            self._close_exc()
            self.sanitizer(line, text.split("=========", 1)[1])
            return
        m = _SAN_TOOL_OPT.search(text) or _SAN_CMD.search(text)
        if m:
            self.san_tool = m.group(1)
            if m.lastindex and m.lastindex >= 2:
                self.san_check = m.group(2)
        stripped = text.strip()
        # a translated page may have lost the word `Assertion`: a kernel file with block/thread coordinates is one
        if (_ASSERT_HINT.search(text) and ("block" in text or "Assertion failed" in text)) or (
                "block" in text and _COORD.search(text) and _FUZZY_FILE.search(text)):
            if self.assertion(line):
                return
        if self.pending_warning is not None:
            self._warning_message(line)
        if _EXC_START.match(text) or _IPY_FRAME.match(stripped) or _IPY_ARROW.match(stripped):
            self.traceback(line)
        elif self.expect_code and self.exc is None and self.frames and stripped and not set(stripped) <= _CARETS:
            self.frames[-1].code = stripped  # the source line Python prints under `File ..., line N`
            self.expect_code = False
        elif self.exc is None and self.plain_frames and self.frames[-1].code and stripped and not set(stripped) <= _CARETS:
            # after a plain frame and its source line, a line that is neither is the exception line
            # without its `Type: ` (only the message was pasted)
            self._start_exc(line, "", stripped)
        elif self.exc is not None and self.exc_lines < MAX_MESSAGE_LINES and stripped:
            self.exc.message += "\n" + stripped
            self.exc.last_line = line.no
            self.exc_lines += 1
        if _CUDA_HINT.search(text):
            self.cuda_line(line)
        if "out of memory" in text and "Tried to allocate" in text:
            self.oom(line)
        if _DIST_HINT.search(text) or (self.elastic is not None and _TABLE_KEY.match(text)) or text.strip() == "[0]:":
            self.distributed(line)
        self.messages(line, text)

    # -- python tracebacks -----------------------------------------------------------------------
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
                self.wrapper_at = next((i for i in range(len(self.out) - 1, -1, -1)
                                        if isinstance(self.out[i], PyException)), None)
        elif kind == "frame":
            self._close_exc()
            name = (token(alt, "FILENAME") or '""')[1:-1]
            self.frames.append(Frame(file=name, line=_int(token(alt, "INT")), function=token(alt, "FUNCNAME")))
            self.expect_code = self.plain_frames = True
        elif kind == "ipython_frame":
            self._close_exc()
            self.plain_frames = False
            # IPython 8 prints `Cell In[7], line 3[, in f(...)]`; older ones the line on the `---->` arrow
            name = token(alt, "IPY_FILE") or token(alt, "CELL") or ""
            self.frames.append(Frame(file=name, line=_int(token(alt, "INT")), function=token(alt, "FUNCNAME")))
        elif kind == "ipython_arrow":
            if self.frames:
                self.frames[-1].line = _int(token(alt, "INT"))
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
            first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank, exc_type=exc_type,
            message=msg, frames=self.frames, chained=self.chain, has_header=self.header,  # type: ignore[arg-type]
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

    # -- kernel asserts --------------------------------------------------------------------------
    def assertion(self, line: Line) -> bool:
        self.asserts += 1
        text = line.text.strip()
        if self.asserts > MAX_ASSERT_PARSES:
            rec = fuzzy_assert(line)
            if rec is not None:
                rec.source = "printf" if _COORD.search(text) else "fuzzy"
                self.out.append(rec)
                return True
            return False
        start = re.search(r"(?:\[CUDA_KERNEL_ASSERT\]\s*)?(?:[A-Za-z]:[\\/])?[^\s:：]*[\w>)\]]\s*[:：]\s*\d+\s*[:：]", text)
        tree = parse("kernel_assert", text[start.start():]) if start else None
        if tree is not None:
            rec = kernel_assert(tree, line)
            if _plausible(rec):
                self.out.append(rec)
                return True
        rec = fuzzy_assert(line)
        if rec is not None:
            self.out.append(rec)
            return True
        return False

    # -- CUDA / C++ ------------------------------------------------------------------------------
    def cuda_line(self, line: Line) -> None:
        text = line.text.strip()
        for start in _cuda_starts(text):
            tree = parse("cuda_error", text[start:])
            if tree is not None:
                self._cuda_tree(first_alt(tree), line)
                return

    def _cuda_tree(self, alt: Tree, line: Line) -> None:
        kind = alt.data
        base: dict[str, Any] = {"first_line": line.no, "last_line": line.no, "raw": line.text, "rank": line.rank}
        text = (token(alt, "TEXT") or "").strip()
        if kind == "cuda_error":
            self.cuda = CudaError(**base, error=text)
            self.out.append(self.cuda)
            lib = re.match(r"(CUBLAS_STATUS_[A-Z_]+)(?:\s+when calling\s+(`[^`]*`?))?", text)
            if lib:
                self._library("cublas", lib.group(1), lib.group(2), line, text)
        elif kind == "legacy":
            ints = tokens(alt, "INT")
            path = token(alt, "AT_PATH") or ""
            self.cuda = CudaError(**base, error=(token(alt, "LEGACY_TEXT") or "").strip(), code=_int(ints[0]),
                                  at_file=path, at_line=_int(ints[-1]), legacy=True)
            self.out.append(self.cuda)
        elif kind == "thc":
            ints = tokens(alt, "INT")
            self.cuda = CudaError(**base, error=text, code=_int(ints[1]), at_file=token(alt, "AT_PATH"),
                                  at_line=_int(ints[0]), legacy=True)
            self.out.append(self.cuda)
        elif kind == "app_error":
            ints = tokens(alt, "INT")
            self.cuda = CudaError(**base, error=text, code=_int(ints[-1]), legacy=True,
                                  at_file=(token(alt, "APP_PATH") or None), at_line=_int(ints[0]) if len(ints) > 1 else None)
            self.cuda.error_name = f"cuda error {ints[-1]}"
            self.out.append(self.cuda)
        elif kind in ("search_hint", "async_hint", "blocking_hint", "dsa_hint"):
            if self.cuda is not None and line.no - self.cuda.last_line <= 6:
                if kind == "search_hint":
                    self.cuda.error_name = (token(alt, "ERROR_NAME") or "`'")[1:-1]
                else:
                    setattr(self.cuda, kind, True)
                self.cuda.last_line = line.no
        elif kind == "cublas":
            call = token(alt, "CALL")
            self._library("cublas", token(alt, "CUBLAS_STATUS") or "", call, line, line.text.strip())
        elif kind == "cudnn":
            self._library("cudnn", token(alt, "CUDNN_STATUS") or "", None, line, line.text.strip())
        elif kind == "terminate":
            self.cpp = CppException(**base, exc_type=(token(alt, "QUOTED_TYPE") or "''")[1:-1])
            self.out.append(self.cpp)
        elif kind == "what":
            if self.cpp is not None and self.cpp.what is None:
                self.cpp.what = text
                self.cpp.last_line = line.no
            m = re.match(r"(?:CUDA|HIP) error:\s*(.+)", text)
            if m:
                self.cuda = CudaError(**base, error=m.group(1).strip())
                self.out.append(self.cuda)
            elif re.match(r"CUBLAS_STATUS|[cC]u[dD][nN][nN] error", text):
                self.cuda_line(Line(line.no, text, line.rank))
        elif kind == "raised_from":
            ints = tokens(alt, "INT")
            info = {"raised_from": token(alt, "RAISER"), "raised_file": token(alt, "AT_PATH"),
                    "raised_line": _int(ints[0]) if ints else None}
            if self.cpp is not None and self.cpp.raised_from is None and line.no - self.cpp.last_line <= 4:
                for k, v in info.items():
                    setattr(self.cpp, k, v)
                self.cpp.last_line = line.no
            else:
                self.cpp = CppException(**base, **info)
                self.out.append(self.cpp)
        elif kind == "cpp_frame":
            if self.cpp is not None:
                self.cpp.frames += 1
                self.cpp.last_line = line.no

    def _library(self, lib: str, status: str, call: str | None, line: Line, message: str) -> None:
        self.out.append(LibraryError(first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank,
                                     library=lib, status=status, call=call.strip("`") if call else None,  # type: ignore[arg-type]
                                     message=message))

    # -- OOM ---------------------------------------------------------------------------------
    def oom(self, line: Line) -> None:
        text = line.text.strip()
        m = re.search(r"(?:[A-Za-z_][\w.]*(?:Error|Exception)\s*:\s*)?(?:CUDA error:\s*)?(?:CUDA|XPU|HIP) out of memory", text)
        if not m:
            return
        tree = parse("oom", text[m.start():])
        if tree is None:
            return
        rec = Oom(first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank)
        prefix = token(tree, "PREFIX")
        if prefix and not prefix.startswith("CUDA error"):
            rec.exc_type = prefix.split(":")[0].strip()
        rec.device = token(tree, "DEVICE") or "CUDA"
        sizes = [s for s in tree.children if getattr(s, "type", None) == "SIZE"]
        rec.tried_to_allocate = str(sizes[0]) if sizes else None
        sent = subtree(tree, "sentences")
        if sent is not None:
            ints = [c for c in sent.children if getattr(c, "type", None) == "INT"]
            rec.gpu_index = _int(str(ints[0])) if ints else None
            s = [str(c) for c in sent.children if getattr(c, "type", None) == "SIZE"]
            rec.total_capacity, rec.free = (s + [None, None])[:2]
            for sub in sent.children:
                if not isinstance(sub, Tree):
                    continue
                vals = tokens(sub, "SIZE")
                if sub.data == "process":
                    pass
                elif sub.data == "including":
                    rec.process_memory_in_use = vals[0]
                elif sub.data == "allowed":
                    rec.allowed = vals[0]
                elif sub.data == "allocated":
                    priv = subtree(sub, "private")
                    if priv is not None:
                        rec.private_pools = tokens(priv, "SIZE")[0]
                        vals = [v for v in vals if v != rec.private_pools] or vals
                    rec.allocated_by_pytorch, rec.reserved_but_unallocated = vals[0], vals[-1]
        par = subtree(tree, "parens")
        if par is not None:
            rec.gpu_index = _int(token(par, "INT"))
            names = {"total capacity": "total_capacity", "already allocated": "already_allocated", "free": "free",
                     "allowed": "allowed", "reserved in total by PyTorch": "reserved_in_total", "cached": "cached"}
            for f in par.find_data("field"):
                setattr(rec, names[token(f, "FIELD_NAME") or "free"], token(f, "SIZE"))
        self.out.append(rec)

    # -- distributed ---------------------------------------------------------------------------
    def distributed(self, line: Line) -> None:
        text = line.text.strip()
        m = re.search(r"\[[EWI]\d*(?: [\d:.]+)? ProcessGroupNCCL|Watchdog caught|Process group watchdog|NCCL error"
                      r"|Root Cause|Other Failures", text)
        candidates = [text[m.start():]] if m else [text]
        tree = None
        for cand in candidates:
            tree = parse("distributed", cand)
            if tree is not None:
                break
        if tree is None:
            return
        alt = first_alt(tree)
        base: dict[str, Any] = {"first_line": line.no, "last_line": line.no, "raw": line.text, "rank": line.rank}
        if alt.data == "watchdog":
            rank_tag = token(alt, "RANK_TAG")
            rank = int(re.findall(r"\d+", rank_tag)[-1]) if rank_tag else line.rank
            base["rank"] = rank
            inner = first_alt(alt) if not isinstance(alt.children[-1], Tree) else alt.children[-1]
            if inner.data == "terminated":  # the watchdog's exception is often the timeout itself
                inner = subtree(inner, "timeout") or inner
            if inner.data == "timeout":
                fields = {token(f, "WORK_KEY"): token(f, "WORK_VAL") for f in inner.find_data("work_field")}
                self.out.append(NcclEvent(**base, event="watchdog_timeout", text=text, op_type=fields.get("OpType"),
                                          seq_num=_int(fields.get("SeqNum")), timeout_ms=_int(fields.get("Timeout(ms)")),
                                          ran_for_ms=_int(token(inner, "INT"))))
            elif inner.data == "terminated":
                self.out.append(NcclEvent(**base, event="watchdog_exception", text=text))
            else:
                self.out.append(NcclEvent(**base, event="aborted", text=text))
        elif alt.data == "nccl_error":
            self.out.append(NcclEvent(**base, event="nccl_error", text=text, nccl_error=(token(alt, "REST") or "").strip()))
        elif alt.data == "table_head":
            self.elastic_root = text.startswith("Root Cause")
        elif alt.data == "table_field":
            key = (token(alt, "TABLE_KEY") or "").strip()
            val = (token(alt, "REST") or "").strip()
            if key.startswith("["):
                self.elastic = ElasticFailure(**base, root=self.elastic_root)
                self.out.append(self.elastic)
            elif self.elastic is not None:
                self.elastic.last_line = line.no
                if key == "rank":
                    nums = re.findall(r"\d+", val)
                    self.elastic.failed_rank = _int(nums[0]) if nums else None
                    self.elastic.local_rank = _int(nums[1]) if len(nums) > 1 else None
                elif key == "exitcode":
                    self.elastic.exitcode = _int((re.findall(r"-?\d+", val) or [None])[0])
                elif key == "host":
                    self.elastic.host = val
                elif key == "time":
                    self.elastic.time = val
                elif key == "error_file":
                    self.elastic.error_file = val

    # -- messages ------------------------------------------------------------------------------
    def messages(self, line: Line, text: str) -> None:
        """Read the first message template in the line; where one may start is derived from messages.lark."""
        for start in anchors("messages").starts(text):
            if self.message(line, text[start:]):
                return

    def message(self, line: Line, text: str) -> bool:
        tree = parse("messages", text)
        if tree is None:
            return False
        alt = first_alt(tree)
        template = alt.data
        shapes = [[int(x) for x in tokens(s, "INT")] for s in alt.find_data("shape")]
        ints = [int(str(c)) for c in alt.children if getattr(c, "type", None) in ("INT", "SIGNED")]
        words = [str(c).strip("\"'") for c in alt.children if getattr(c, "type", None) in
                 ("WORD", "DEVICE", "TENSOR_TYPE", "OP_NAME", "ATEN_OP", "FN_NAME", "BACKWARD_NAME", "QUOTED_NAME", "CONV_KIND", "ARCH", "GPU_NAME")]
        values: dict = {}
        if template in ("broadcast", "expand"):
            values = {"size_a": ints[0], "size_b": ints[1], "dim": ints[2]}
        elif template == "broadcast_fake" and len(shapes) == 2:
            values = {"size_a": ints[0], "dim": ints[1], "argument_index": ints[2]}
        elif template == "cat_sizes":
            values = {"dim": ints[0], "size_a": ints[1], "size_b": ints[2], "tensor_number": ints[3]}
        elif template == "matmul_dim":
            values = {"mat1_dim": ints[0], "mat2_dim": ints[1]}
        elif template == "conv_dims":
            values = {"expected_dims": ints[0], "weight_dims": ints[1], "got_dims": ints[2]}
        elif template == "conv_input":
            values = {"op": words[0]}
        elif template in ("device_fake", "device_type_old"):
            devs = words[1:] if template == "device_fake" else words  # device_fake names the op first
            values = {"device_a": devs[-2], "device_b": devs[-1]} if len(devs) >= 2 else {}
            if template == "device_fake":
                values["op"] = words[0]
        elif template == "matmul":
            shapes = [[ints[0], ints[1]], [ints[2], ints[3]]]
        elif template == "conv":
            values = {"groups": ints[0], "expected_channels": ints[1], "got_channels": ints[2], "kind": words[0]}
        elif template == "batch_size":
            values = {"input_batch": ints[0], "target_batch": ints[1]}
        elif template in ("spatial_target", "spatial_input"):
            values = {"expected_dims": ints[0]}
            if len(ints) > 1:
                values["got_dims"] = ints[1]
        elif template in ("scalar_type", "scalar_type_old", "not_implemented"):
            values = {"expected": words[0], "found": words[1]} if len(words) > 1 else {}
        elif template == "target_oob":
            values = {"target": ints[0]}
        elif template == "bce_range":
            values = {"which": words[0]}
        elif template == "index_oob":
            values = {"index": ints[0], "dim": ints[1], "size": ints[2]}
            op = self._calling_op(_INDEX_OPS)
            if op:
                values["op"] = op
        elif template == "target_size_nd":
            if len(shapes) == 2 and len(shapes[1]) == len(shapes[0]) + 1 and shapes[1][1] == 1:
                values["extra_singleton_dim"] = 1
        elif template == "device_expected":
            values = {"device_a": words[0], "device_b": words[1]}
        elif template in ("device_mismatch",):
            values = {"device_a": words[0], "device_b": words[1]}
        elif template == "device_mismatch_new":
            values = {"argument": words[0], "device_a": words[1], "device_b": words[2]}
        elif template == "input_weight_type":
            values = {"input_type": words[0], "weight_type": words[1]}
        elif template in ("deterministic", "anomaly_nan", "anomaly_detected"):
            values = {"op": words[0]}
            if template != "deterministic":
                values["backward_function"] = words[0]
        elif template == "target_dtype":
            values = {"expected": " or ".join(words[:-1]), "found": words[-1]}
        elif template == "arch_incompatible":
            self.arch = ArchWarning(first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank,
                                    gpu_name=words[0].strip(), device_capability=words[1])
            self.out.append(self.arch)
            return True
        elif template == "arch_supported":
            if self.arch is not None:
                self.arch.supported_archs = [w for w in words if w.startswith("sm_")]
                self.arch.last_line = line.no
            return True
        rest = token(tree, "REST")
        body = text[: len(text) - len(rest)] if rest else text
        roles = {name: [int(x) for x in tokens(sub, "INT")] for name in ("input_shape", "target_shape")
                 for sub in alt.find_data(name)}
        self.out.append(TorchMessage(first_line=line.no, last_line=line.no, raw=line.text, rank=line.rank,
                                     template=template, text=body.strip(), values=values, shapes=shapes, **roles))
        return True

    def _calling_op(self, pattern: re.Pattern[str]) -> str | None:
        """The op named on the source line that raised, when the traceback printed it."""
        frames = self.exc.frames if self.exc is not None and self.exc.frames else self.frames
        for frame in reversed(frames[-3:]):
            m = pattern.search(frame.code or "")
            if m:
                return m.group(1)
        return None

    # -- sanitizer ------------------------------------------------------------------------------
    def sanitizer(self, line: Line, body: str) -> None:
        tree = parse("sanitizer", body) if body.strip() else None
        if tree is None:
            return
        alt = first_alt(tree)
        kind = alt.data
        base: dict[str, Any] = {"first_line": line.no, "last_line": line.no, "raw": line.text, "rank": line.rank}
        tool = self.san_tool
        if kind == "banner":
            self.san_tool = "cuda-memcheck" if "MEMCHECK" in body else "compute-sanitizer"
            return
        header = {
            "invalid_access": ("memcheck", "invalid_access"), "uninitialized": ("initcheck", "uninitialized"),
            "host_api": ("initcheck", "host_api_access"), "unused": ("initcheck", "unused_memory"),
            "barrier": ("synccheck", "barrier"), "wgmma": ("synccheck", "wgmma"),
            "malloc_free": ("memcheck", "malloc_free"), "api_error": (None, "api_error"),
            "leaked": ("leakcheck", "leak"), "race": ("racecheck", "race"), "hazard": ("racecheck", "hazard"),
        }
        if kind in header:
            check, category = header[kind]
            if check is None:
                check = self.san_check if self.san_check in ("memcheck", "racecheck", "initcheck", "synccheck") else "memcheck"
            if kind == "invalid_access" and token(alt, "POTENTIAL"):
                check = "racecheck"
            rec = SanitizerReport(**base, tool=tool, check=check, category=category)  # type: ignore[arg-type]
            rec.memory_space = token(alt, "SPACE")
            rec.access = token(alt, "ACCESS")
            if kind in ("invalid_access", "uninitialized", "host_api", "leaked", "unused"):
                rec.access_size_bytes = _int(token(alt, "NUMBER"))
            if kind == "uninitialized":
                rec.memory_space = rec.memory_space or "__global__"
            if kind in ("host_api", "leaked", "unused"):
                rec.address = token(alt, "HEX")
            if kind == "barrier":
                rec.severity = (token(alt, "BARRIER_CLASS") or "").strip(" .") or None
            if kind == "malloc_free":
                rec.severity = (token(alt, "REST") or "").strip()
            if kind == "api_error":
                rec.api_error = token(alt, "API_ERR")
                rec.api_code = _int(token(alt, "INT"))
                q = token(alt, "QUOTED")
                rec.api_message = q[1:-1] if q else None
                rec.api_call = (token(alt, "API_NAME") or "").rstrip(".") or None
            if kind in ("race", "hazard"):
                rec.severity = (token(alt, "SEVERITY") or "").rstrip(":")
                rec.memory_space = "__shared__"
                rec.access = (token(alt, "RW") or "").lower() or None
                if kind == "race":
                    self._set_location(rec, location(token(alt, "LOCATION") or ""))
                    hz = _HAZARDS.search(token(alt, "LOCATION") or "")
                    rec.hazards = int(hz.group(1)) if hz else None
                else:
                    rec.hazard_type = token(alt, "HAZARD")
                    rec.address = token(alt, "HEX")
                    coords = token(alt, "COORDS")
                    rec.block = _triple(coords) if coords else None
            if tool is None:
                rec.tool = self._guess_tool(body)
            self.san = rec
            self.out.append(rec)
            return
        rec = self.san
        if kind in ("error_summary", "leak_summary", "race_summary"):
            ints = [_int(t) for t in tokens(alt, "INT")]
            summ = SanitizerSummary(**base, tool=tool)
            if kind == "error_summary":
                summ.errors = ints[0]
            elif kind == "leak_summary":
                summ.leaked_bytes, summ.leaked_allocations = ints[0], ints[1]
            else:
                summ.hazards = ints[0]
            self.out.append(summ)
            self.san = None
            return
        if rec is None:
            return
        rec.last_line = line.no
        rec.raw += "\n" + line.text
        if kind == "at":
            loc = location(token(alt, "LOCATION") or "")
            self._set_location(rec, loc)
            if rec.tool is None or self.san_tool is None:
                if re.match(r"0x[0-9a-fA-F]{8}\b", (token(alt, "LOCATION") or "").strip()):
                    rec.tool = "cuda-memcheck"
        elif kind == "by_thread":
            coords = tokens(alt, "COORDS")
            rec.thread, rec.block = _triple(coords[0]), _triple(coords[1])
        elif kind == "address":
            rec.address = token(alt, "HEX")
            rec.address_phrase = token(alt, "PHRASE")
        elif kind == "allocation":
            rec.allocation = (token(alt, "ALLOC_TEXT") or "").strip()
        elif kind == "device_frame":
            loc = location(token(alt, "LOCATION") or "")
            rec.device_frames.append(loc)
            if loc.file and (rec.file is None or _TOOLKIT_PATH.search(rec.file)) and not _TOOLKIT_PATH.search(loc.file):
                rec.file, rec.line = loc.file, loc.line
        elif kind == "host_frame":
            rest = (token(alt, "REST") or "").strip()
            rec.host_frames.append(_host_frame(rest))
            if re.search(r"\(.+ \+ 0x[0-9a-f]+\) \[0x", rest) and self.san_tool is None:
                rec.tool = "cuda-memcheck"
        elif kind == "module_line":
            if rec.host_frames and rec.host_frames[-1].module is None:
                rec.host_frames[-1].module = (token(alt, "MODULE") or "").strip()
        elif kind == "hazard_access":
            loc = location(token(alt, "LOCATION") or "")
            if rec.function is None:
                self._set_location(rec, loc)
                rec.thread = _triple(token(alt, "COORDS") or "0,0,0")
        elif kind == "uninit_access":
            by = (token(alt, "REST") or "").split()
            rec.api_call = by[0] if by else None
        elif kind == "and_access":
            hz = _HAZARDS.search(token(alt, "LOCATION") or "")
            if hz:
                rec.hazards = (rec.hazards or 0) + int(hz.group(1))

    def _set_location(self, rec: SanitizerReport, loc: SanitizerFrame) -> None:
        rec.function = loc.function
        rec.pc = loc.module
        if loc.file:
            rec.file, rec.line = loc.file, loc.line

    def _guess_tool(self, body: str) -> str | None:
        if re.search(r"of size \d+\s*$", body):
            return "cuda-memcheck"
        if re.match(r"\s*(?:WARN|ERROR):", body):
            return "cuda-memcheck"
        return "compute-sanitizer" if re.search(r"bytes|Error:|Warning:", body) else None


_FILE_NAME = re.compile(r"^[\w\-.]+\.\w+$|^unknown$")


def _plausible(rec: KernelAssert) -> bool:
    """A strict parse of an interleaved line can still pick up garbage; reject such parses."""
    if not _FILE_NAME.match(rec.kernel_file) or rec.condition != clean_condition(rec.condition):
        return False
    return not (rec.function and re.search(r"[:：]\d+[:：]|block\s*:", rec.function))


def _host_frame(rest: str) -> SanitizerFrame:
    m = re.match(r"^(?P<module>.+?) \((?P<sym>.+) \+ 0x[0-9a-f]+\) \[0x[0-9a-f]+\]$", rest)
    if m:
        return SanitizerFrame(function=m.group("sym"), module=m.group("module"))
    m = re.match(r"^(?P<sym>.*?)\s*\[0x[0-9a-f]+\](?: in (?P<module>.+))?$", rest)
    if m:
        return SanitizerFrame(function=m.group("sym") or None, module=m.group("module"))
    m = re.match(r"^(?P<module>\S+) \[0x[0-9a-f]+\]$", rest)
    if m:
        return SanitizerFrame(module=m.group("module"))
    return SanitizerFrame(function=rest or None)


def _cuda_starts(text: str) -> list[int]:
    """Offsets where a CUDA-error sentence may begin inside a line (after prose or a prefix)."""
    starts = [0]
    for m in re.finditer(r"(?:RuntimeError|\w+Error|c10::\w+)\s*:\s*|CUDA error|HIP error|cuda runtime error|THCudaCheck"
                         r"|CUBLAS_STATUS|[cC]u[dD][nN][nN] error|cuda error \d|terminate called|what\(\)|Exception raised from", text):
        if m.start() not in starts:
            starts.append(m.start())
    return starts[:4]
