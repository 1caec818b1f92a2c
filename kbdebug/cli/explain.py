"""`kbdebug explain FILE...`: diagnose logs and print the report, with the exit status of kbdebug/cli/status.py.

Its plain forms (`explain LOG`, `-f json`, `-q`, `--kb DIR`, `--report URL`, several logs) are read here
without typer (`fast_explain`): importing typer is a tenth of a cold start, and the floor a cold `explain` is
measured against (benchmarks/startup.py) is a typer CLI. kbdebug.cli.app's typer command calls the same
`explain_logs` for help and for the forms `parse_explain_args` leaves to typer.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbdebug.cli.options import TEXT, Format, fail, kb_dirs, read_options
from kbdebug.cli.status import STDIN_NOTHING, exit_status
from kbdebug.core.term import output_width, use_color

if TYPE_CHECKING:
    from kbdebug.diagnosis import Diagnosis

# `explain`'s options as `parse_explain_args` reads them: name -> (parameter, kind). Kept equal to the typer
# command's options by a test (tests/test_cli.py).
FAST_OPTIONS = {
    "--format": ("fmt", "format"),
    "-f": ("fmt", "format"),
    "--quiet": ("quiet", "true"),
    "-q": ("quiet", "true"),
    "--kb": ("kb", "paths"),
    "--report": ("report", "text"),
    "--facts": ("facts", "true"),
    "--verbose": ("facts", "true"),
    "-v": ("facts", "true"),
}


def parse_explain_args(args: list[str]) -> dict[str, Any] | None:
    """`explain`'s arguments read without typer, or None when typer must read them (help, a usage error)."""
    values: dict[str, Any] = {"fmt": TEXT, "quiet": False, "kb": None, "report": None, "facts": False}
    files = read_options(args, FAST_OPTIONS, values, interspersed=True)
    if not files:
        return None
    return {"files": files, **values}


def fast_explain(args: list[str]) -> int | None:
    """`kbdebug explain ARGS` without typer; its exit status, or None to hand ARGS to typer."""
    values = parse_explain_args(args)
    if values is None:
        return None
    quiet_start()
    try:
        return explain_logs(**values)
    except KeyboardInterrupt:
        return 130


def quiet_start() -> None:
    """A short run: no collections while start-up builds long-lived objects (see `settle`); a closed pipe
    downstream (`kbdebug explain log | head`) ends kbdebug quietly, as it does `cat`."""
    gc.disable()
    import signal

    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class InputError(Exception):
    """A problem with the user's input: reported on one line, exit status 2."""


def _read_stdin(passthrough: bool, to_stderr: bool = False):
    """Stream stdin through the scanner, echoing each chunk as soon as it arrives: to stdout in front of a
    text report, to stderr in front of a JSON, HTML or Markdown one (stdout is then exactly the report)."""
    from kbdebug.parse.needles import needles
    from kbdebug.scan import Scanner

    scanner = Scanner(needles)
    fd = sys.stdin.fileno()
    out = (sys.stderr if to_stderr else sys.stdout).buffer
    try:
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            if passthrough:
                out.write(data)
                out.flush()
            scanner.feed(data)
    except KeyboardInterrupt:
        pass
    if passthrough:
        out.flush()
    return scanner.close()


def regions_for(path: str, passthrough: bool, to_stderr: bool = False):
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_path

    if path == "-":
        return _read_stdin(passthrough, to_stderr)
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a directory")
    try:
        return scan_path(p, needles)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def explain_logs(
    files: list[str], fmt: Format = TEXT, quiet: bool = False, kb: list[Path] | None = None, report: str | None = None, facts: bool = False
) -> int:
    """Diagnose the logs and print the report; the exit status (kbdebug/cli/status.py)."""
    kb = kb_dirs(kb)
    if files.count("-") > 1:
        fail("standard input can be named only once")
    if len(files) > 1 or any(os.path.isdir(f) or (any(c in f for c in "*?[") and not os.path.exists(f)) for f in files):
        return _explain_many(files, fmt, quiet, kb, report, facts)
    from kbdebug.api import diagnose_regions
    from kbdebug.kb import RuleFileError, load_kb
    from kbdebug.render import render

    settle()

    diags, logs = [], []
    try:
        for path in files:
            regions = regions_for(path, passthrough=not quiet, to_stderr=fmt != "text")
            diags.append(diagnose_regions(regions, source=path, kb_dirs=kb))
            logs.append((path, regions))
        base = load_kb(kb)
    except (InputError, RuleFileError) as exc:
        fail(str(exc))
    passed_through = files == ["-"] and not quiet  # kbdebug is a filter in the run's pipeline (cli_status)
    if files == ["-"] and not any(d.incidents for d in diags):
        _say(STDIN_NOTHING)
        if passed_through and fmt == "text":  # the clean run's verdict is on stderr; stdout stays the run's output
            return exit_status(diags, base, passed_through)
    sys.stdout.write(render(diags, fmt.value, color=use_color(sys.stdout) and fmt == "text", width=output_width(sys.stdout), facts=facts))
    sys.stdout.flush()
    if report:
        _report(report, logs)
    return exit_status(diags, base, passed_through)


def _explain_many(files: list[str], fmt: Format, quiet: bool, kb: list[Path] | None, report: str | None = None, facts: bool = False) -> int:
    """Many logs: each diagnosis as it is ready (JSON: one object per line; HTML: sections of one document),
    then the crashes grouped by signature."""
    from kbdebug.cli.batch import expand, is_text_log
    from kbdebug.kb import RuleFileError, load_kb
    from kbdebug.render import render
    from kbdebug.render.summary import render_summary

    settle()
    named = set(files)
    paths = expand(files)
    for path in paths:
        if path != "-" and not os.path.isfile(path):
            fail(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a regular file")
    binary = [p for p in paths if p != "-" and p not in named and not is_text_log(p)]
    if binary:  # found in a directory or by a glob: a checkpoint or an image is not a log
        shown = ", ".join(binary[:5]) + (f" and {len(binary) - 5} more" if len(binary) > 5 else "")
        _say(f"kbdebug: skipped {len(binary)} binary file{'s' * (len(binary) != 1)} (not a text log): {shown}")
        paths = [p for p in paths if p not in binary]
    if not paths:
        fail("no log files found in " + ", ".join(files))
    color, width = use_color(sys.stdout) and fmt == "text", output_width(sys.stdout)
    diags = []
    sys.stdout.write(render([], fmt.value, part="head"))  # a document's head (HTML's), nothing in the other formats
    with _progress(len(paths)) as tick:
        try:
            for diag in _each(paths, quiet, kb, to_stderr=fmt != "text"):
                diags.append(diag)
                tick(len(diags))
                sys.stdout.write(render([diag], fmt.value, color=color, width=width, part="body", facts=facts))
                sys.stdout.flush()
            base = load_kb(kb)
        except (InputError, RuleFileError, OSError) as exc:
            fail(str(exc))
    sys.stdout.write(render_summary(diags, fmt.value, width=width, kb=base))
    sys.stdout.write(render([], fmt.value, part="foot"))
    sys.stdout.flush()
    if report:
        _report(report, [(path, None) for path in paths if path != "-"])
    return exit_status(diags, base, passed_through=False)


def _report(url: str, logs: list[tuple[str, Any]]) -> None:
    """`--report URL`: each log to the crash service, after the local output (kbdebug/runtime/reporting.py)."""
    from kbdebug.runtime.reporting import report_logs

    report_logs(url, logs)


def _each(paths: list[str], quiet: bool, kb: list[Path] | None, to_stderr: bool) -> Iterator[Diagnosis]:
    from kbdebug.api import diagnose_regions
    from kbdebug.cli.batch import diagnose_files

    if "-" in paths:  # standard input is read here, in order, with the files around it
        for path in paths:
            if path == "-":
                yield diagnose_regions(regions_for(path, passthrough=not quiet, to_stderr=to_stderr), source=path, kb_dirs=kb)
            else:
                yield from diagnose_files([path], kb)
        return
    yield from diagnose_files(paths, kb)


class _progress:
    """rich's progress bar on a terminal for long runs (stderr, so stdout stays the report); nothing otherwise."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Any:
        if self.total >= 20 and sys.stderr.isatty():
            from rich.progress import Progress

            self.bar = Progress(transient=True, console=None)
            self.bar.start()
            self.task = self.bar.add_task("diagnosing", total=self.total)
        return self.tick

    def tick(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def settle() -> None:
    """After the imports: the models, parsers and templates built so far live until exit, so the collector
    need never scan them again (`gc.freeze`); collections resume for what the diagnosis allocates."""
    gc.freeze()
    gc.enable()
