"""What the readers of a region share while they walk its lines, and small helpers of theirs.

Each format has its reader (a mixin with the methods that turn that grammar's trees into records);
`kbdebug.parse.assemble.Assembler` combines them and dispatches each line. The state lives here so
that a reader can close or extend a record another one opened (a traceback's message that is also
a CUDA error, a C++ block after a Python exception).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kbdebug.normalise import Line
from kbdebug.records import ArchWarning, CppException, CudaError, ElasticFailure, Frame, PyException, Record, SanitizerReport


def triple(text: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in re.findall(r"\d+", text)[:3])
    return (a, b, c)


def read_at(line: Line) -> dict[str, Any]:
    """Where a record read off one line comes from: its line number (first and last), text, rank and time."""
    return {"first_line": line.no, "last_line": line.no, "raw": line.text, "rank": line.rank, "time": line.time}


class State:
    """The records being built; set up by Assembler.__init__."""

    out: list[Record]
    frames: list[Frame]
    header: bool
    chain: str | None
    exc: PyException | None
    exc_lines: int
    cuda: CudaError | None
    cpp: CppException | None
    san: SanitizerReport | None
    san_tool: str | None
    san_check: str | None
    arch: ArchWarning | None
    elastic: ElasticFailure | None
    elastic_root: bool
    elastic_table: bool
    asserts: int
    pending_warning: tuple[Line, str] | None
    tb_start: int
    wrapper_at: int | None
    expect_code: bool
    free_code: str | None
    plain_frames: bool
    fatal: PyException | None
    dump_thread: str | None

    if TYPE_CHECKING:  # the readers call each other through the Assembler that combines them

        def oom(self, line: Line) -> None: ...
        def messages(self, line: Line, text: str) -> None: ...
        def cuda_line(self, line: Line) -> None: ...
        def _close_exc(self) -> None: ...
