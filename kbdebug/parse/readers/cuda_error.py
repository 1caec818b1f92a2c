"""Host-side CUDA errors and what surrounds them (legacy and THC forms, cuBLAS/cuDNN statuses, the
C++ `terminate called` / `what():` / `Exception raised from` block)."""

from __future__ import annotations

from collections.abc import Sequence

from lark import Token

from kbdebug.core.phrases import hedged
from kbdebug.normalise import Line
from kbdebug.parse.derive import anchors
from kbdebug.parse.fields import Fields, FieldTransformer, unquote
from kbdebug.parse.lines import parse_in
from kbdebug.parse.reader import Reader, Sink, read_at
from kbdebug.records import CppException, CudaError, Frame, LibraryError


class CudaTree(FieldTransformer):
    """cuda_error.lark's tree to the line's kind and the fields of the record it starts or extends."""

    grammar = "cuda_error"

    def error_name(self, children: list[Token]) -> Fields:
        return {"error_name": str(children[0])[1:-1]}  # `cudaErrorAssert'

    def call(self, children: list[Token]) -> Fields:
        return {"call": str(children[0]).strip("`") or None}

    def exc_type(self, children: list[Token]) -> Fields:
        return {"exc_type": unquote(str(children[0]))}

    def status_text(self, children: list[Token]) -> Fields:
        text = str(children[0]).strip()
        return {"status": CUBLAS_STATUS_TEXTS.get(text.lower(), "CUBLAS_STATUS_UNKNOWN"), "status_text": text}


# THC's words for each cuBLAS status (THCGeneral's __THCublasCheck printed these, not the names)
CUBLAS_STATUS_TEXTS = {
    "library not initialized": "CUBLAS_STATUS_NOT_INITIALIZED",
    "resource allocation failed": "CUBLAS_STATUS_ALLOC_FAILED",
    "an invalid numeric value was used as an argument": "CUBLAS_STATUS_INVALID_VALUE",
    "an absent device architectural feature is required": "CUBLAS_STATUS_ARCH_MISMATCH",
    "an access to gpu memory space failed": "CUBLAS_STATUS_MAPPING_ERROR",
    "the gpu program failed to execute": "CUBLAS_STATUS_EXECUTION_FAILED",
    "an internal operation failed": "CUBLAS_STATUS_INTERNAL_ERROR",
}


_OPENS_CUDA_ERROR = ("cuda_error", "legacy", "thc", "app_error")
_HINTS = ("search_hint", "async_hint", "blocking_hint", "dsa_hint")
HINT_DISTANCE = 6  # lines between a CUDA error and the hints PyTorch prints under it
RAISED_DISTANCE = 4  # lines between `what():` and its `Exception raised from`


class CudaErrorReader(Reader):
    """A CUDA error opens a record that the hints under it extend; a C++ abort block is one record."""

    order = 40

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        self.cuda: CudaError | None = None
        self.cpp: CppException | None = None

    def read(self, line: Line) -> bool:
        at = anchors("cuda_error").starts(line.text, 2)
        inside = [k for k in at if k > 0]  # (0: the line as a whole, which a template may also read)
        if at and not (inside and hedged(line.text, inside[0])):  # not a tip's `if you see 'CUDA error: ...'`
            self.cuda_line(line)
        return False

    def cuda_line(self, line: Line) -> None:
        tree = parse_in("cuda_error", line.text.strip())
        if tree is not None:
            self._cuda_fields(CudaTree().read(tree), line)

    def _cuda_fields(self, f: Fields, line: Line) -> None:
        kind = f.pop("template")
        base = read_at(line)
        if kind in _OPENS_CUDA_ERROR:
            self.cuda = CudaError(**base, **f, legacy=kind != "cuda_error")
            if kind == "app_error":
                self.cuda.error_name = f"cuda error {f['code']}"
            self.sink.emit(self.cuda)
            self._reread(line, self.cuda.error)  # `CUDA error: CUBLAS_STATUS_...`: the library's status too
        elif kind in _HINTS:
            if self.cuda is not None and line.no - self.cuda.last_line <= HINT_DISTANCE:
                if kind == "search_hint":
                    self.cuda.error_name = f["error_name"]
                else:
                    setattr(self.cuda, kind, True)
                self.cuda.last_line = line.no
        elif kind in ("cublas", "cudnn"):
            self.sink.emit(LibraryError(**base, library=kind, message=line.text.strip(), **f))
        elif kind == "cublas_thc":
            at = {k: f[k] for k in ("at_file", "at_line") if k in f}
            self.sink.emit(LibraryError(**base, library="cublas", status=f["status"], message=line.text.strip(), **at))
        elif kind == "cublas_entry":
            self.sink.emit(
                LibraryError(**base, library="cublas", status="CUBLAS_STATUS_INVALID_VALUE", call=f.get("call"), message=line.text.strip())
            )
        elif kind == "terminate":
            self.cpp = CppException(**base, **f)
            self.sink.emit(self.cpp)
        elif kind == "what_line":
            if self.cpp is not None and self.cpp.what is None:
                self.cpp.what = f["what"]
                self.cpp.last_line = line.no
            self._reread(line, f["what"])  # what() holds the CUDA error or the library's status
        elif kind == "raised_at":
            if self.cpp is not None and self.cpp.raised_from is None and line.no - self.cpp.last_line <= RAISED_DISTANCE:
                for k, v in f.items():
                    setattr(self.cpp, k, v)
                self.cpp.last_line = line.no
            else:
                self.cpp = CppException(**base, **f)
                self.sink.emit(self.cpp)
        elif kind == "cpp_frame" and self.cpp is not None:
            self.cpp.frames += 1
            self.cpp.last_line = line.no

    def _reread(self, line: Line, text: str) -> None:
        """Read a message held inside another (an error's text, what()'s) as a line of its own."""
        if text and text != line.text.strip():
            self.cuda_line(line._replace(text=text))
