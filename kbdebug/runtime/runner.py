"""`kbdebug run -- CMD`: run a command, stream its output live, diagnose it when it fails.

The child's stdout and stderr are copied to ours chunk by chunk as they arrive (progress bars
stay live) and held, whole lines merged, for the diagnosis at the end (see `_Feed`: memory and disk stay
bounded on a run that prints for days). Signals are forwarded; the child's exit status becomes ours,
and how it ended (a signal, a core dump) is handed to the diagnosis as a record of its own: a segfault
prints nothing.

A wrapper must cost its job nothing: while the child runs, the wrapper only copies (and, past a megabyte of
output, searches it for the scanner's needles); the parsers and the diagnosis pipeline are imported only when
the child fails, or its output holds a line that can open a record.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kbdebug.runtime.fdtee import write_all

if TYPE_CHECKING:  # imported when the child fails (or prints a lot): a run that succeeds needs no parser
    from kbdebug.normalise import Region
    from kbdebug.scan import Scanner

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
RERUN_ENV = {"CUDA_LAUNCH_BLOCKING": "1", "TORCH_SHOW_CPP_STACKTRACES": "1"}
FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2") if hasattr(signal, n))
PIPE_GRACE = 2.0  # seconds to drain the pipes after the child exits
MAX_PARTIAL = 64 * 1024  # a "line" longer than this (a progress bar without newlines) is scanned in pieces
HOLD = 1 << 20  # output held in memory, unscanned, until it outgrows this; then it is scanned as it arrives
BATCH = 1 << 20  # once scanning as it arrives, the scanner reads this much at a time
# An unbuffered child (PYTHONUNBUFFERED, as run makes a Python child) writes each line on its own: read as they
# come, 100k lines cost the wrapper 100k wake-ups, reads and writes, more CPU than the child's own. A pump that
# read less than a full READ waits GATHER seconds, so that its next read takes what the child wrote meanwhile
# (the pipe is made PIPE_SIZE large, so the child does not block while it waits): output is still shown within
# a hundredth of a second, and a pump wakes at most a hundred times a second.
READ = 1 << 20
PIPE_SIZE = 1 << 20  # Linux's default limit for an unprivileged process (/proc/sys/fs/pipe-max-size)
GATHER = 0.01


class RunError(Exception):
    """A problem starting the command: reported on one line."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


class _Feed:
    """The child's merged output, kept for a diagnosis that happens only at the end.

    While the child runs, copying its output is the wrapper's whole job: the first `hold` bytes are only held
    in memory (a short run builds nothing). A run that outgrows them builds the scanner (the needles and an
    RE2 pass: no parser), which reads what was held and then the rest in BATCH pieces as it arrives: memory
    stays bounded on a run that prints for days, and nothing is written to disk. Its lines are counted (by the
    scanner, which counts them anyway), so a record of how the child ended can be placed after its last line.
    """

    def __init__(self, hold: int = HOLD) -> None:
        self.hold = hold
        self.held: list[bytes] = []  # arrived and not yet read by the scanner
        self.size = 0  # their bytes
        self._scanner: Scanner | None = None
        self.broken = False  # building the scanner failed in a pump; the diagnosis tries again and reports it
        self._uncounted = 0  # lines fed and then dropped: those held when the scanner failed, and any after

    @property
    def lines(self) -> int:
        """The lines fed so far."""
        counted = self._scanner.lines if self._scanner is not None else 0
        return self._uncounted + counted + sum(chunk.count(b"\n") for chunk in self.held)

    def feed(self, data: bytes) -> None:
        if self.broken:
            self._uncounted += data.count(b"\n")
            return
        self.held.append(data)
        self.size += len(data)
        due = self.size > self.hold if self._scanner is None else self.size >= BATCH
        if not due:
            return
        try:
            self.scanner()
        except Exception:  # the scanner failed to build (a broken install): the pumps must go on copying the
            self._uncounted = self.lines  # output, or the child blocks
            self.held, self.size, self.broken, self._scanner = [], 0, True, None

    def scanner(self) -> Scanner:
        """The scanner, having read everything fed so far (built here on first use)."""
        if self._scanner is None:
            from kbdebug.parse.needles import needles
            from kbdebug.scan import Scanner

            self._scanner = Scanner(needles)
        if self.held:
            self._scanner.feed(b"".join(self.held))
            self.held, self.size = [], 0
        return self._scanner


class RunResult:
    """How one run of the command went. A plain class: `dataclasses` imports `inspect`, a tenth of a
    job wrapper's start."""

    def __init__(self, returncode: int, env: dict[str, str] | None = None) -> None:
        self.returncode = returncode  # as a shell reports it: 128 + N for a death by signal N
        self.feed = _Feed()
        self.env: dict[str, str] = env if env is not None else {}
        self.signal: int | None = None  # the signal that killed the child, when one did
        self.core_dumped = False
        self.interrupted: int | None = None  # a signal that reached kbdebug itself (Ctrl-C, a scheduler's SIGTERM)
        self._regions: list[Region] | None = None

    @property
    def regions(self) -> list[Region]:
        """The regions of the output that can hold evidence (the scanner is built here if it was not yet)."""
        if self._regions is None:
            self._regions = self.feed.scanner().close()
        return self._regions

    @property
    def lines(self) -> int:
        return self.feed.lines


def find_sanitizer() -> str | None:
    """compute-sanitizer from $KBDEBUG_COMPUTE_SANITIZER, PATH, $CUDA_HOME/bin or /usr/local/cuda/bin."""
    override = os.environ.get("KBDEBUG_COMPUTE_SANITIZER")
    if override is not None:
        return override if os.path.isfile(override) and os.access(override, os.X_OK) else None
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            cand = Path(root) / "bin" / "compute-sanitizer"
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


def sanitizer_command(tool: str, cmd: list[str]) -> list[str]:
    if tool not in SANITIZER_TOOLS:
        raise RunError(f"unknown sanitizer tool {tool!r}; choose from {', '.join(SANITIZER_TOOLS)}")
    exe = find_sanitizer()
    if exe is None:
        raise RunError(
            "compute-sanitizer is not on PATH; it ships with the CUDA toolkit "
            "(e.g. /usr/local/cuda/bin): install the toolkit or add its bin/ to PATH"
        )
    return [exe, "--tool", tool, *cmd]


class _Pump(threading.Thread):
    """Copy one of the child's pipes to our fd, its own save file, the merged save file and (line by line)
    the scanner.

    The stream's own log gets every byte as it arrives; the merged log and the scanner get whole lines, so
    that stdout and stderr interleave line by line there, not in the middle of one (a Python child prints
    a line and its newline in two writes). Saving and scanning happen under `lock`, which `run_once` also
    takes to detach the pump when the child has exited but a grandchild still holds the pipe open.
    """

    def __init__(
        self, src: IO[bytes], dest_fd: int, feed: Callable[[bytes], None], saves: list[int], merged: int | None, lock: threading.Lock
    ) -> None:
        super().__init__(daemon=True)
        self.src, self.dest_fd, self.feed, self.saves, self.merged, self.lock = src, dest_fd, feed, saves, merged, lock
        self.echo = True
        self.detached = False

    def _lines(self, data: bytes, end: bytes = b"") -> None:
        """Whole lines (or a piece of an overlong one, `end` closing it for the scanner) to the merged log and the scanner."""
        if self.merged is not None:
            write_all(self.merged, data)
        self.feed(data + end)

    def run(self) -> None:
        fd = self.src.fileno()
        partial = b""
        while True:
            try:
                data = os.read(fd, READ)
            except InterruptedError:
                continue
            except OSError:
                break
            if not data:
                break
            with self.lock:  # saved before it is shown: whatever the user saw is in the log, whoever is killed next
                if not self.detached:
                    for save in self.saves:
                        write_all(save, data)  # unbuffered: nothing waits in kbdebug's memory for a flush
                    partial += data
                    cut = partial.rfind(b"\n") + 1
                    if cut:
                        self._lines(partial[:cut])
                        partial = partial[cut:]
                    if len(partial) > MAX_PARTIAL:
                        self._lines(partial, b"\n")
                        partial = b""
            if self.echo:
                self.echo = write_all(self.dest_fd, data)
            if len(data) < READ:  # the pipe is drained: let the child's next lines gather in it
                time.sleep(GATHER)
        with self.lock:
            if partial and not self.detached:
                self._lines(partial, b"\n")


def _keyboard_signal_reaches_child() -> bool:
    """True when we sit in the terminal's foreground group: Ctrl-C then reaches the child directly."""
    if not hasattr(os, "tcgetpgrp"):  # Windows: a console Ctrl-C reaches every attached process
        return True
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def run_once(
    cmd: list[str], env: dict[str, str], save: Path | None = None, tag: str = "run1", out_fd: int = 1, err_fd: int = 2
) -> RunResult:
    """Run `cmd` once. With `save`, its logs are created before the child starts and written as each chunk
    arrives, unbuffered: a child (or a kbdebug) killed at any moment leaves everything it printed on disk."""
    result = RunResult(returncode=0, env=env)
    lock = threading.Lock()
    files: list[IO[bytes]] = []
    saves_out: list[int] = []
    saves_err: list[int] = []
    merged: int | None = None
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        files = [open(save / f"{tag}{part}.log", "wb", buffering=0) for part in ("", ".stdout", ".stderr")]
        saves_out, saves_err, merged = [files[1].fileno()], [files[2].fileno()], files[0].fileno()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except FileNotFoundError:
        for f in files:
            f.close()
        raise RunError(f"{cmd[0]}: command not found", 127) from None
    except PermissionError:
        for f in files:
            f.close()
        raise RunError(f"{cmd[0]}: permission denied", 126) from None
    assert proc.stdout is not None and proc.stderr is not None
    for pipe in (proc.stdout, proc.stderr):
        _widen(pipe.fileno())
    feed = result.feed.feed  # called with `lock` held
    pumps = [_Pump(proc.stdout, out_fd, feed, saves_out, merged, lock), _Pump(proc.stderr, err_fd, feed, saves_err, merged, lock)]
    for p in pumps:
        p.start()

    def forward(signum: int, _frame: Any) -> None:
        result.interrupted = signum
        if signum == signal.SIGINT and _keyboard_signal_reaches_child():
            return  # the terminal sent it to the whole group; sending it again would double it
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            try:
                previous[sig] = signal.signal(sig, forward)
            except (OSError, ValueError):
                pass
    try:
        rc, result.core_dumped = _wait(proc)
        for p in pumps:  # a daemon grandchild may keep the pipe open: do not wait for it forever
            p.join(PIPE_GRACE)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with lock:
            for p in pumps:
                p.detached = p.is_alive()
            for f in files:
                f.close()
        if not any(p.is_alive() for p in pumps):
            proc.stdout.close()
            proc.stderr.close()
    result.returncode = 128 - rc if rc < 0 else rc
    result.signal = -rc if rc < 0 else None
    return result


def _widen(fd: int) -> None:
    """Let the pipe hold PIPE_SIZE bytes, so that a child writing while a pump gathers seldom waits (Linux)."""
    try:
        import fcntl
    except ImportError:  # Windows
        return
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:  # a lower limit: the pipe keeps its size
            pass


def _wait(proc: subprocess.Popen[bytes]) -> tuple[int, bool]:
    """The child's return code (-N for a death by signal N) and whether it dumped core, which only the
    raw wait status says (`Popen.wait` drops it)."""
    if os.name != "posix":
        return proc.wait(), False
    try:
        _, status = os.waitpid(proc.pid, 0)  # retried on EINTR (PEP 475): forwarding a signal does not end the wait
    except ChildProcessError:  # reaped elsewhere
        return proc.wait(), False
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, os.WIFSIGNALED(status) and os.WCOREDUMP(status)


def needs_rerun(diag: Any, env: dict[str, str] | None = None) -> bool:
    """The error surfaced asynchronously (an illegal access, a failed launch, a bare device-side assert)
    and nothing in the log says which kernel failed: the Python line shown is only where it was noticed."""
    if (env if env is not None else os.environ).get("CUDA_LAUNCH_BLOCKING") == "1":
        return False  # already synchronous: a second run would show the same
    root = diag.root
    if root is None:
        return False
    from kbdebug.kb import load_kb

    if load_kb().tagged(root.rule, "async"):  # reported at a later call than the one that failed
        return True
    return bool(root.facts.get("async_hint")) and not root.device_evidence


def write_summary(save: Path, cmd: list[str], results: list[tuple[RunResult, Any]]) -> None:
    """diagnosis.json: each run's log, status, the environment kbdebug set, and its diagnosis (docs/json.md's)."""
    from kbdebug.render import json_object

    runs = []
    for i, (res, diag) in enumerate(results, 1):
        extra = {k: v for k, v in res.env.items() if k in RERUN_ENV and os.environ.get(k) != v}
        runs.append(
            {"log": f"run{i}.log", "returncode": res.returncode, "env": extra, "diagnosis": json_object(diag) if diag is not None else None}
        )
    import json

    (save / "diagnosis.json").write_text(json.dumps({"command": cmd, "runs": runs}, indent=2, ensure_ascii=False) + "\n")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")  # a Python child would otherwise hold its output until exit
    if extra:
        env.update(extra)
    return env


def stderr_is_interactive() -> bool:
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def new_save_dir(base: Path) -> Path:
    """A fresh numbered folder for this run's logs (`base/run-001`, `run-002`, ...), so no run overwrites another.

    `mkdir` without exist_ok claims the number atomically, so two runs saving to one place at once still differ.
    """
    base.mkdir(parents=True, exist_ok=True)
    numbers = [int(p.name[4:]) for p in base.glob("run-*") if p.name[4:].isdigit()]
    n = max(numbers, default=0) + 1
    while True:
        path = base / f"run-{n:03d}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1


def shell_quote(cmd: list[str]) -> str:
    """The command as the user's shell would need it typed (`python -c 'raise SystemExit(3)'`)."""
    return subprocess.list2cmdline(cmd) if os.name == "nt" else shlex.join(cmd)
