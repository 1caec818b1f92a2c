"""Records of how a job ended, beyond its kernels: the exit status or signal a shell, a launcher, a
scheduler or `kbdebug run` itself reports. One vocabulary whoever reports it, so one rule reads them all."""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
from typing import Literal

from kbdebug.core.facts import Facts
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
    command: str | None = None  # what the shell ran (`python train.py`), when it says
    FIELD_FACTS = ("signal", "exit_code", "pid", "command")

    def facts(self) -> Facts:
        return super().facts() | self._fields(*self.FIELD_FACTS) | {"exit_reporter": self.reporter}


# strsignal()'s description of each signal: what a shell prints for a job it lost (`Killed`, `Segmentation
# fault (core dumped)`) and what a DataLoader says of its worker (`killed by signal: Bus error`).
SIGNAL_TEXTS: dict[str, str] = {
    "hangup": "SIGHUP",
    "interrupt": "SIGINT",
    "illegal instruction": "SIGILL",
    "aborted": "SIGABRT",
    "abort": "SIGABRT",
    "bus error": "SIGBUS",
    "floating point exception": "SIGFPE",
    "killed": "SIGKILL",
    "segmentation fault": "SIGSEGV",
    "broken pipe": "SIGPIPE",
    "terminated": "SIGTERM",
}
_NUMBERS = {name: number for number, name in SIGNALS.items()}


def signal_name(number: int) -> str:
    """`SIGKILL` for 9; `SIG<n>` for a number without a common name."""
    return SIGNALS.get(number, f"SIG{number}")


def signal_of_text(text: str) -> str | None:
    """`SIGBUS` for strsignal's `Bus error` (any case); None for a text that names no signal."""
    return SIGNAL_TEXTS.get(" ".join(text.lower().split()))


def exit_status(signal: str | None) -> int | None:
    """The exit status a shell reports for a job killed by `signal`: 128 + its number (137 for SIGKILL)."""
    number = _NUMBERS.get(signal or "")
    return None if number is None else 128 + number


# Windows ends a process that crashed with an NTSTATUS as its exit code (`-1073741819`, printed `0xC0000005`):
# the signal a POSIX system sends for the same fault.
NTSTATUS_SIGNALS: dict[int, str] = {
    0xC0000005: "SIGSEGV",  # STATUS_ACCESS_VIOLATION
    0xC00000FD: "SIGSEGV",  # STATUS_STACK_OVERFLOW
    0xC000001D: "SIGILL",  # STATUS_ILLEGAL_INSTRUCTION
    0xC0000094: "SIGFPE",  # STATUS_INTEGER_DIVIDE_BY_ZERO
    0xC0000409: "SIGABRT",  # STATUS_STACK_BUFFER_OVERRUN (a fail-fast abort)
}


def signal_of_status(status: int) -> str | None:
    """The signal behind an exit status: a launcher's negative exitcode (-9), a shell's 128 + n (137), or the
    NTSTATUS of a Windows crash (-1073741819 or 3221225477, 0xC0000005)."""
    if (status & 0xFFFFFFFF) in NTSTATUS_SIGNALS:
        return NTSTATUS_SIGNALS[status & 0xFFFFFFFF]
    if -64 < status < 0:
        return signal_name(-status)
    if 128 < status < 128 + 32 and status - 128 in SIGNALS:
        return SIGNALS[status - 128]
    return None


# Who printed a JobEvent's line: the kernel, a scheduler, glibc, a DataLoader, a launcher, a container runtime, or a
# library that aborts the process itself (cuDNN's loader)
JobSource = Literal["kernel", "scheduler", "glibc", "dataloader", "launcher", "container", "library"]


class JobEvent(Record):
    """A line that says how a job was ended from outside its Python: the kernel's OOM killer or an NVIDIA
    Xid (dmesg / journald), the scheduler (slurmstepd's `CANCELLED ... DUE TO TIME LIMIT`, `oom_kill event`,
    Kubernetes' `OOMKilled`), glibc's heap checks (`free(): invalid pointer`), a library's own loader before it aborts
    (cuDNN's `Could not load library ...`) or a DataLoader's report of
    a worker's fault. `event` is the grammar's line kind (grammars/job/job.lark)."""

    kind: Literal["job_event"] = "job_event"
    FIELD_FACTS = ("pid", "process", "xid", "pci", "job_id", "node", "reason", "signal", "task")
    event: str
    source: JobSource
    text: str = ""
    pid: int | None = None
    process: str | None = None
    xid: int | None = None
    pci: str | None = None
    job_id: str | None = None
    node: str | None = None
    reason: str | None = None
    signal: str | None = None
    events: int | None = None
    task: int | None = None

    def facts(self) -> Facts:
        f = super().facts() | self._fields(*self.FIELD_FACTS)
        f["job_event"] = self.event
        if self.text:
            f["event_text"] = self.text
        return f
