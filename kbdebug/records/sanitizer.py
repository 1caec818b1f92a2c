"""compute-sanitizer / cuda-memcheck reports: one record per error report (its location, thread, block and
access), and the tool's closing summary."""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kbdebug.core.facts import Facts
from kbdebug.core.frames import basename
from kbdebug.records.base import Record, Triple


class SanitizerFrame(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built with the first sanitizer report (see Record)

    function: str | None = None
    file: str | None = None
    line: int | None = None
    module: str | None = None


class SanitizerReport(Record):
    """One compute-sanitizer / cuda-memcheck error report with its detail lines."""

    kind: Literal["sanitizer"] = "sanitizer"
    FIELD_FACTS = (
        "memory_space",
        "access",
        "access_size_bytes",
        "address",
        "address_phrase",
        "allocation",
        "hazard_type",
        "hazards",
        "api_error",
        "api_call",
        "severity",
    )
    tool: Literal["compute-sanitizer", "cuda-memcheck"] | None = None
    check: Literal["memcheck", "racecheck", "initcheck", "synccheck", "leakcheck"]
    category: str
    severity: str | None = None
    memory_space: str | None = None
    access: str | None = None
    access_size_bytes: int | None = None
    function: str | None = None
    pc: str | None = None
    file: str | None = None
    line: int | None = None
    thread: Triple | None = None
    block: Triple | None = None
    address: str | None = None
    address_phrase: str | None = None
    allocation: str | None = None
    hazard_type: str | None = None
    hazards: int | None = None
    api_error: str | None = None
    api_code: int | None = None
    api_message: str | None = None
    api_call: str | None = None
    device_frames: list[SanitizerFrame] = []
    host_frames: list[SanitizerFrame] = []

    def facts(self) -> Facts:
        f = super().facts()
        f |= {"tool": self.tool, "check": self.check, "category": self.category}
        f |= self._fields(*self.FIELD_FACTS)
        if self.function is not None:
            f["kernel_name"] = self.function
        if self.pc is not None:
            f["pc_offset"] = self.pc
        if self.file:
            f["kernel_file"], f["kernel_line"], f["kernel_path"] = basename(self.file), self.line, self.file
        if self.thread is not None:
            f["first_thread"] = list(self.thread)
        if self.block is not None:
            f["first_block"] = list(self.block)
        if self.api_message:
            f["error_message"] = self.api_message
        return f


class SanitizerSummary(Record):
    kind: Literal["sanitizer_summary"] = "sanitizer_summary"
    FIELD_FACTS = ("tool", "leaked_bytes", "leaked_allocations")
    tool: str | None = None
    errors: int | None = None
    hazards: int | None = None
    leaked_bytes: int | None = None
    leaked_allocations: int | None = None

    def facts(self) -> Facts:
        """A leak summary is the leak check's own report: when only the summary was pasted it is the evidence."""
        f = super().facts() | self._fields(*self.FIELD_FACTS)
        if self.errors is not None:
            f["error_summary_count"] = self.errors
        if self.leaked_bytes:
            f["check"] = "leakcheck"
        return f
