"""How a run under `kbdebug run` ended, and what follows from it: the record of its status that the rules
read beside its output (a segfault prints nothing), the usual sender of an unexplained SIGKILL, and whether
`--retry` runs the job again.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbdebug.records.job import ProcessExit

# Exit statuses a shell gives a child that a signal killed (128 + N): read as that signal. 129/130/141
# (SIGHUP, Ctrl-C, a closed pipe) are as often a program's own choice and say nothing about a crash.
SIGNAL_STATUSES = {128 + n: n for n in (4, 6, 7, 8, 9, 11, 15)}


def status_record(returncode: int, killed_by: int | None, core_dumped: bool, lines: int) -> ProcessExit | None:
    """How the child ended, as the record a shell's `Segmentation fault (core dumped)` would give: for a
    death by signal (`killed_by`, its number), or an exit status that a shell gives a child a signal killed
    (137, 139, 143...). It is placed after the output's `lines` lines: the last thing that happened."""
    number = killed_by or SIGNAL_STATUSES.get(returncode)
    if number is None:
        return None
    from kbdebug.records.job import ProcessExit, signal_name

    name = signal_name(number)
    how = f"was killed by {name}" if killed_by else f"exited with status {returncode} ({name})"
    return ProcessExit(
        signal=name,
        exit_code=returncode,
        reporter="status",
        core_dumped=core_dumped,
        first_line=lines + 1,
        last_line=lines + 1,
        raw=f"kbdebug run: the command {how}{' (core dumped)' if core_dumped else ''}",
    )


# What an exit status with no recognised cause in the output usually means: the process was killed
# from outside, so its own output cannot say why.
KILLED_HINTS = {
    137: (
        "it was killed with SIGKILL, which the kernel's OOM killer or a job scheduler (Slurm, Kubernetes) usually "
        "sends when the process exceeds its memory limit; check `dmesg -T | grep -i -E 'killed process|out of memory'` "
        "and the job's memory limit (`sacct -j JOBID -o MaxRSS,ReqMem`, `kubectl describe pod`)"
    ),
}


def exit_hint(returncode: int) -> str | None:
    """The usual reason for an exit status whose output explains nothing (None when there is no usual reason)."""
    return KILLED_HINTS.get(returncode)


# What each `retry` value of rule-ids.md means for `kbdebug run --retry`: only "yes" is rerun as is.
RETRY_REASONS = {
    "yes": "the job was stopped by its infrastructure, not by its own error",
    "no": "a bug in code or data: a rerun would fail the same way",
    "smaller": "out of a resource: a rerun as is would run out again; rerun with less (memory, batch, workers, shm) or on a larger machine",
    "after-install": "the environment is broken: fix the install, then rerun",
}


def retry_decision(diag: Any, interrupted: int | None, done: int, allowed: int) -> tuple[bool, str]:
    """Whether `kbdebug run --retry` runs the job again after a failed attempt, and the one line that says why.

    `done` reruns have been made of the `allowed` ones. Only a root cause whose `retry` is "yes" is rerun;
    a run during which kbdebug itself received a signal (`interrupted`: Ctrl-C, the scheduler stopping the
    whole job) never is.
    """
    root = diag.root if diag is not None else None
    if interrupted is not None:
        return False, f"not rerunning: kbdebug itself received {_signal_text(interrupted)}"
    if root is None:
        return False, "not rerunning: nothing in the output names a cause that a rerun would fix"
    retry = str(root.facts.get("retry") or "no")
    cause = f"{root.rule} ({root.title}, retry: {retry})"
    if retry != "yes":
        return False, f"not rerunning: {cause}: {RETRY_REASONS.get(retry, RETRY_REASONS['no'])}"
    if done >= allowed:
        return False, f"not rerunning: {cause}, but --retry {allowed} allows no more reruns"
    return True, f"rerunning ({done + 1} of {allowed}): {cause}: {RETRY_REASONS['yes']}"


def _signal_text(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
