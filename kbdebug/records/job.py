"""Records of how a job ended, beyond its kernels: the exit status or signal a shell, a launcher, a
scheduler or `kbdebug run` itself reports. One vocabulary whoever reports it, so one rule reads them all."""

from __future__ import annotations

from typing import Any, Literal

from kbdebug.records.base import Record

# The signals a job dies of, by number (Linux), and the name a log may print instead.
SIGNALS: dict[int, str] = {
    1: "SIGHUP",
    2: "SIGINT",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    13: "SIGPIPE",
    15: "SIGTERM",
}


class ProcessExit(Record):
    """A process ended with an exit status or a signal: a shell's `Killed` / `Segmentation fault (core
    dumped)`, torchrun's `exitcode: -9`, `Signal 9 (SIGKILL) received`, or the status `kbdebug run` saw."""

    kind: Literal["process_exit"] = "process_exit"
    signal: str | None = None  # "SIGKILL"
    exit_code: int | None = None  # 137; a launcher's negative exitcode is kept as -signal
    reporter: Literal["shell", "launcher", "scheduler", "status"] = "shell"
    core_dumped: bool = False
    pid: int | None = None
    FIELD_FACTS = ("signal", "exit_code", "pid")

    def facts(self) -> dict[str, Any]:
        return super().facts() | self._fields(*self.FIELD_FACTS)


def signal_name(number: int) -> str:
    """`SIGKILL` for 9; `SIG<n>` for a number without a common name."""
    return SIGNALS.get(number, f"SIG{number}")
