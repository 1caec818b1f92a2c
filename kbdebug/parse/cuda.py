"""Host-side CUDA errors and what surrounds them (legacy and THC forms, cuBLAS/cuDNN statuses, the
C++ `terminate called` / `what():` / `Exception raised from` block), and CUDA out-of-memory messages."""

from __future__ import annotations

import re

from lark import Tree

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at, to_int
from kbdebug.parse.grammar import first_alt, parse, subtree, token, tokens
from kbdebug.records import CppException, CudaError, LibraryError, Oom

_CUDA_HINT = re.compile(
    r"CUDA error|HIP error|cuda runtime error|THCudaCheck|cuda error \d|Search for `|asynchronously reported"
    r"|CUDA_LAUNCH_BLOCKING|TORCH_USE_(?:CUDA|HIP)_DSA|CUBLAS_STATUS|CUDNN_STATUS|terminate called"
    r"|what\(\):|Exception raised from|^\s*frame #\d+",
    re.I,
)


class CudaReader(State):
    def cuda_line(self, line: Line) -> None:
        text = line.text.strip()
        for start in _cuda_starts(text):
            tree = parse("cuda_error", text[start:])
            if tree is not None:
                self._cuda_tree(first_alt(tree), line)
                return

    def _cuda_tree(self, alt: Tree, line: Line) -> None:
        kind = alt.data
        base = read_at(line)
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
            self.cuda = CudaError(
                **base,
                error=(token(alt, "LEGACY_TEXT") or "").strip(),
                code=to_int(ints[0]),
                at_file=path,
                at_line=to_int(ints[-1]),
                legacy=True,
            )
            self.out.append(self.cuda)
        elif kind == "thc":
            ints = tokens(alt, "INT")
            self.cuda = CudaError(
                **base, error=text, code=to_int(ints[1]), at_file=token(alt, "AT_PATH"), at_line=to_int(ints[0]), legacy=True
            )
            self.out.append(self.cuda)
        elif kind == "app_error":
            ints = tokens(alt, "INT")
            self.cuda = CudaError(
                **base,
                error=text,
                code=to_int(ints[-1]),
                legacy=True,
                at_file=(token(alt, "APP_PATH") or None),
                at_line=to_int(ints[0]) if len(ints) > 1 else None,
            )
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
            info = {
                "raised_from": token(alt, "RAISER"),
                "raised_file": token(alt, "AT_PATH"),
                "raised_line": to_int(ints[0]) if ints else None,
            }
            if self.cpp is not None and self.cpp.raised_from is None and line.no - self.cpp.last_line <= 4:
                for k, v in info.items():
                    setattr(self.cpp, k, v)
                self.cpp.last_line = line.no
            else:
                self.cpp = CppException.model_validate({**base, **info})
                self.out.append(self.cpp)
        elif kind == "cpp_frame":
            if self.cpp is not None:
                self.cpp.frames += 1
                self.cpp.last_line = line.no

    def _library(self, lib: str, status: str, call: str | None, line: Line, message: str) -> None:
        self.out.append(
            LibraryError(
                **read_at(line),
                library=lib,  # type: ignore[arg-type]
                status=status,
                call=call.strip("`") if call else None,
                message=message,
            )
        )

    # -- OOM ---------------------------------------------------------------------------------
    def oom(self, line: Line) -> None:
        text = line.text.strip()
        m = re.search(r"(?:[A-Za-z_][\w.]*(?:Error|Exception)\s*:\s*)?(?:CUDA error:\s*)?(?:CUDA|XPU|HIP) out of memory", text)
        if not m:
            return
        tree = parse("oom", text[m.start() :])
        if tree is None:
            return
        rec = Oom(**read_at(line))
        prefix = token(tree, "PREFIX")
        if prefix and not prefix.startswith("CUDA error"):
            rec.exc_type = prefix.split(":")[0].strip()
        rec.device = token(tree, "DEVICE") or "CUDA"
        sizes = [s for s in tree.children if getattr(s, "type", None) == "SIZE"]
        rec.tried_to_allocate = str(sizes[0]) if sizes else None
        sent = subtree(tree, "sentences")
        if sent is not None:
            ints = [c for c in sent.children if getattr(c, "type", None) == "INT"]
            rec.gpu_index = to_int(str(ints[0])) if ints else None
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
            rec.gpu_index = to_int(token(par, "INT"))
            names = {
                "total capacity": "total_capacity",
                "already allocated": "already_allocated",
                "free": "free",
                "allowed": "allowed",
                "reserved in total by PyTorch": "reserved_in_total",
                "cached": "cached",
            }
            for f in par.find_data("field"):
                setattr(rec, names[token(f, "FIELD_NAME") or "free"], token(f, "SIZE"))
        self.out.append(rec)


def _cuda_starts(text: str) -> list[int]:
    """Offsets where a CUDA-error sentence may begin inside a line (after prose or a prefix)."""
    starts = [0]
    for m in re.finditer(
        r"(?:RuntimeError|\w+Error|c10::\w+)\s*:\s*|CUDA error|HIP error|cuda runtime error|THCudaCheck"
        r"|CUBLAS_STATUS|[cC]u[dD][nN][nN] error|cuda error \d|terminate called|what\(\)|Exception raised from",
        text,
    ):
        if m.start() not in starts:
            starts.append(m.start())
    return starts[:4]
