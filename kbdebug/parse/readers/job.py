"""How a job ended, read from the lines the system around it prints (grammars/job.lark): the kernel's OOM
killer and Xid reports, Slurm, Kubernetes, glibc's heap checks, a DataLoader worker's fault, torchrun's
and a shell's report of a process that died. A death becomes a ProcessExit (one vocabulary, whoever
reports it); everything else a JobEvent named after its line kind."""

from __future__ import annotations

from typing import Any, Literal

from lark import Token

from kbdebug.normalise import Line
from kbdebug.parse.derive import may_hold
from kbdebug.parse.fields import Fields, FieldTransformer
from kbdebug.parse.lines import parse, parse_in
from kbdebug.parse.reader import Reader, read_at
from kbdebug.records import JobEvent, ProcessExit
from kbdebug.records.job import JobSource, exit_status, signal_of_status, signal_of_text

# Who prints each line kind, and the signal it implies where the line names none
_SOURCES: dict[str, tuple[JobSource, str | None]] = {
    "oom_killed_process": ("kernel", "SIGKILL"),
    "oom_kill": ("kernel", "SIGKILL"),
    "xid_report": ("kernel", None),
    "gpu_lost": ("kernel", None),
    "slurm_cancelled": ("scheduler", None),
    "slurm_oom": ("scheduler", "SIGKILL"),
    "slurm_mem_limit": ("scheduler", "SIGKILL"),
    "srun_task": ("scheduler", None),
    "pbs_killed": ("scheduler", None),
    "lsf_killed": ("scheduler", None),
    "condor_memory": ("scheduler", None),
    "k8s_oomkilled": ("scheduler", "SIGKILL"),
    "k8s_evicted": ("scheduler", None),
    "k8s_deadline": ("scheduler", None),
    "preempted": ("scheduler", None),
    "container_gpu": ("container", None),
    "library_load": ("library", None),
    "kernel_fault": ("kernel", None),
    "heap_corruption": ("glibc", "SIGABRT"),
    "stack_smashing": ("glibc", "SIGABRT"),
    "worker_fault": ("dataloader", None),
    "launcher_signal": ("launcher", None),
}


class JobTree(FieldTransformer):
    """job.lark's (and shell.lark's) tree to a record's fields: a signal's description (`Bus error`) becomes its name."""

    grammar = "job"

    def death(self, children: list[Token]) -> Fields:
        return {"signal": signal_of_text(str(children[0]))}

    def worker_signal(self, children: list[Token]) -> Fields:
        return {"signal": signal_of_text(str(children[0]))}

    def core(self, children: list[Token]) -> Fields:
        return {"core_dumped": True}

    def signal_name(self, children: list[Token]) -> Fields:
        return {"signal": str(children[0])}

    def segfault(self, children: list[Token]) -> Fields:
        return {"signal": "SIGSEGV"}

    def trap(self, children: list[Token]) -> Fields:
        """The signal the kernel sends for the trap it names (an invalid opcode is SIGILL, a divide error SIGFPE)."""
        kind = str(children[-1])
        return {"signal": {"invalid opcode": "SIGILL", "divide error": "SIGFPE"}.get(kind, "SIGSEGV")}

    def srun_oom(self, children: list[Token]) -> Fields:
        return {"reason": "Out Of Memory"}


class ShellTree(JobTree):
    grammar = "shell"


class JobReader(Reader):
    order = 80

    def read(self, line: Line) -> bool:
        self.job_line(line)
        return False

    def job_line(self, line: Line) -> None:
        """A shell's report as the whole line; else a job.lark line kind from wherever one may start in it."""
        text = line.text.strip()
        if may_hold("shell", text) and (tree := parse("shell", text)) is not None:
            fields = ShellTree().read(tree)
            fields.pop("template")
            self.sink.emit(ProcessExit(**read_at(line), reporter="shell", exit_code=exit_status(fields.get("signal")), **fields))
            return
        if not may_hold("job", text):
            return
        tree = parse_in("job", text)
        if tree is None:
            return
        record = _record(line, text, JobTree().read(tree))
        if record is not None:
            self.sink.emit(record)


def _record(line: Line, text: str, fields: Fields) -> JobEvent | ProcessExit | None:
    """The line's record; None for a scheduler's report of a status that names no signal (srun's `Exited with exit
    code 1`, kubectl's `Exit Code: 1`): it says only that the task failed."""
    kind: str = fields.pop("template")
    at: dict[str, Any] = read_at(line)
    signal = fields.get("signal")
    if "exitcode" in fields:  # a launcher's, an IDE's or a scheduler's report of the status a process exited with
        code = fields["exitcode"]
        by: Literal["launcher", "scheduler"] = "scheduler" if kind in ("k8s_exit", "srun_task") else "launcher"
        if by == "scheduler" and signal_of_status(code) is None:
            return None
        return ProcessExit(**at, reporter=by, exit_code=code, signal=signal or signal_of_status(code), pid=fields.get("pid"))
    if kind == "srun_task" and fields.get("reason") is None:
        core = bool(fields.get("core_dumped"))
        return ProcessExit(**at, reporter="scheduler", exit_code=exit_status(signal), signal=signal, core_dumped=core)
    source, implied = _SOURCES[kind]
    # Slurm's memory accounting and its oom_kill count say the same: the scheduler killed the step for memory
    event = {"srun_task": "srun_oom", "slurm_mem_limit": "slurm_oom"}.get(kind, kind)
    keep = {k: v for k, v in fields.items() if k in JobEvent.model_fields and k != "text"}
    keep["signal"] = signal or implied
    return JobEvent(**at, event=event, source=source, text=text, **keep)
