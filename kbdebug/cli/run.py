"""`kbdebug run -- CMD`: run a command, stream its output, diagnose it when it fails, re-run it blocking or,
with `--retry N`, again while its cause says a rerun helps.

A job wrapper starts in a few milliseconds: `kbdebug run` is read by `parse_run_args` and run by `run_job`
without typer (its import is 30 ms, typer 0.29 also imports pydantic to convert a command's parameters);
typer reads `run` only for help and the forms `parse_run_args` leaves to it (`typer_command`).
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from kbdebug.cli.options import TEXT, Format, fail, kb_dirs, read_options
from kbdebug.core.term import output_width, use_color

if TYPE_CHECKING:
    from kbdebug.core.facts import Facts

# registered by kbdebug.cli.app: app.command("run", context_settings=RUN_CONTEXT)(run_cmd)
RUN_CONTEXT = {"allow_interspersed_args": False, "ignore_unknown_options": True}

# `run`'s options as `parse_run_args` reads them: name -> (parameter, kind). Kept equal to run_cmd's typer
# options by a test (tests/test_run_job.py).
FAST_OPTIONS = {
    "--rerun": ("rerun", "true"),
    "--no-rerun": ("rerun", "false"),
    "--retry": ("retry", "count"),
    "--sanitizer": ("sanitizer", "text"),
    "--save": ("save", "path"),
    "--format": ("fmt", "format"),
    "-f": ("fmt", "format"),
    "--kb": ("kb", "paths"),
    "--report": ("report", "text"),
}


def typer_command() -> Callable[..., None]:
    """`run` as typer sees it (help, completion, the forms `parse_run_args` leaves to typer); built when the
    full CLI is loaded, since it needs typer."""
    import typer

    from kbdebug.cli.options import FormatOption, KbOption, ReportOption

    def run_cmd(
        cmd: Annotated[list[str], typer.Argument(help="The command to run, after `--`.", metavar="-- CMD...")],
        rerun: Annotated[
            bool | None,
            typer.Option(
                "--rerun/--no-rerun", help="Re-run once with CUDA_LAUNCH_BLOCKING=1 when the error was not localised (asks on a TTY)."
            ),
        ] = None,
        retry: Annotated[
            int,
            typer.Option(
                "--retry",
                metavar="N",
                min=0,
                help="Run the job again, up to N times, while its cause says a rerun helps (retry: yes; preemption, a lost GPU).",
            ),
        ] = 0,
        sanitizer: Annotated[
            str | None,
            typer.Option("--sanitizer", metavar="TOOL", help="Run under compute-sanitizer: memcheck, racecheck, initcheck or synccheck."),
        ] = None,
        save: Annotated[Path | None, typer.Option("--save", metavar="DIR", help="Keep the logs and diagnosis.json here.")] = None,
        fmt: FormatOption = TEXT,
        kb: KbOption = None,
        report: ReportOption = None,
    ) -> None:
        """Run a command, stream its output, and diagnose it if it fails. Exit status: the command's."""
        raise typer.Exit(run_job(cmd, rerun, retry, sanitizer, save, fmt, kb, report))

    return run_cmd


def run_job(
    cmd: list[str],
    rerun: bool | None = None,
    retry: int = 0,
    sanitizer: str | None = None,
    save: Path | None = None,
    fmt: Format = TEXT,
    kb: list[Path] | None = None,
    report: str | None = None,
) -> int:
    """Run the job (and again while `--retry` allows); the exit status, the command's."""
    kb = kb_dirs(kb)  # `kbdebug --kb DIR run ...` too
    from kbdebug.runtime.job_end import retry_decision
    from kbdebug.runtime.runner import shell_quote

    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        fail("no command given; use `kbdebug run -- python train.py`")
    attempt = _Attempt(cmd, shell_quote(cmd), rerun, sanitizer, save, fmt, kb, report)
    done = 0
    while True:
        status, diag, result = attempt.run()
        if status == 0 or retry == 0:
            return status
        again, why = retry_decision(diag, result.interrupted, done, retry)
        sys.stderr.write(f"kbdebug: {why}\n")
        sys.stderr.flush()
        if not again:
            return status
        done += 1


class _Attempt:
    """One run of the job as `kbdebug run` makes it: run, diagnose if it failed, re-run it blocking if asked,
    save. The diagnosis pipeline is imported only once a run has failed: a job that succeeds needs none."""

    def __init__(
        self,
        cmd: list[str],
        source: str,
        rerun: bool | None,
        sanitizer: str | None,
        save: Path | None,
        fmt: Format,
        kb: Any,
        report: str | None = None,
    ) -> None:
        self.cmd, self.source, self.rerun, self.sanitizer, self.save, self.fmt, self.kb = cmd, source, rerun, sanitizer, save, fmt, kb
        self.report = report
        self.color, self.width = use_color(sys.stderr) and fmt == "text", output_width(sys.stderr)

    def run(self) -> tuple[int, Any, Any]:
        """The attempt's exit status (the command's), its diagnosis (None when it succeeded) and its RunResult."""
        from kbdebug.runtime.runner import RunError, child_env, new_save_dir, run_once, sanitizer_command, write_summary

        cmd, source = self.cmd, self.source
        save = None
        try:
            if self.save is not None:
                save = new_save_dir(self.save)
        except OSError as exc:
            fail(f"cannot create a folder in {self.save}: {exc.strerror or exc}")
        try:
            argv = sanitizer_command(self.sanitizer, cmd) if self.sanitizer else cmd
            first = run_once(argv, child_env(), save, "run1")
        except RunError as exc:
            sys.stderr.write(f"kbdebug: {exc}\n")
            sys.stderr.flush()
            raise SystemExit(exc.status) from None
        except OSError as exc:
            fail(f"cannot run {cmd[0]}: {exc.strerror or exc}")
        results: list[tuple[Any, Any]] = [(first, None)]
        if first.returncode == 0 and not self.sanitizer:
            warned = self._named_on_success(first, source)
            if save is not None:
                write_summary(save, cmd, [(first, warned)])
            return 0, warned, first
        diag = self._diagnose(first, source, "run")
        results = [(first, diag)]
        out = sys.stderr
        if not diag.incidents:
            if first.returncode not in (0, 130, 143):  # not for Ctrl-C / SIGTERM: the user knows why
                from kbdebug.runtime.job_end import exit_hint

                hint = exit_hint(first.returncode)
                out.write(
                    f"kbdebug: `{source}` exited with status {first.returncode}; nothing in its output matched a known cause"
                    + (f": {hint}" if hint else "")
                    + "\n"
                )
        else:
            out.write(self._render(diag))
        out.flush()
        self._rerun_blocking(first, diag, save, results)
        if save is not None:
            write_summary(save, cmd, results)
            out.write(f"kbdebug: logs and diagnosis.json saved in {save}\n")
        if self.report:  # last: the diagnosis and the saved logs are already out; the exit status stays the command's
            from kbdebug.runtime.reporting import job_metadata, post, regions_text

            post(self.report, regions_text(first.regions), job_metadata(source))
        return first.returncode, diag, first

    def _named_on_success(self, first: Any, source: str) -> Any:
        """A job that exited 0 whose output still names a cause (torch warning that a loss broadcast its
        target, a loss gone NaN): the diagnosis, said to be one of a finished job; the status stays 0. Only
        output where the scanner finds a line that can open a record is diagnosed; a job whose output holds none costs
        no parser (nor the record classes)."""
        if not first.lines:  # (the pumps end the last piece of a line they feed with a newline)
            return None
        if not first.feed.scanner().found() or not first.regions:
            return None
        diag = self._diagnose(first, source, "run")
        from kbdebug.cli.status import NAMED, found
        from kbdebug.kb import load_kb

        if found([diag], load_kb(self.kb)) != NAMED:
            return None
        sys.stderr.write(f"kbdebug: `{source}` exited with status 0, but its output names a cause (the status stays 0):\n")
        sys.stderr.write(self._render(diag))
        sys.stderr.flush()
        return diag

    def _rerun_blocking(self, first: Any, diag: Any, save: Path | None, results: list[tuple[Any, Any]]) -> None:
        """Not localised (an asynchronous CUDA error)? Run once more with CUDA_LAUNCH_BLOCKING=1, or say how."""
        from kbdebug.runtime.runner import RERUN_ENV, child_env, needs_rerun, run_once, stderr_is_interactive

        out = sys.stderr
        if self.sanitizer or first.interrupted is not None or not needs_rerun(diag):
            return
        if self.rerun is None and stderr_is_interactive():
            import typer

            try:
                self.rerun = typer.confirm(
                    "kbdebug: re-run once with CUDA_LAUNCH_BLOCKING=1 to find the failing line?", default=True, err=True
                )
            except typer.Abort:  # Ctrl-C or end of input at the question
                raise KeyboardInterrupt from None
        if self.rerun:
            out.write("\nkbdebug: re-running with " + " ".join(f"{k}={v}" for k, v in RERUN_ENV.items()) + "\n")
            out.flush()
            second = run_once(self.cmd, child_env(RERUN_ENV), save, "run2")
            diag2 = self._diagnose(second, self.source + " (CUDA_LAUNCH_BLOCKING=1)", "rerun")
            results.append((second, diag2))
            out.write(_compare(diag, diag2) + "\n")
            if diag2.incidents:
                out.write(self._render(diag2))
            out.flush()
        elif self.rerun is None:
            out.write(
                "kbdebug: the error was reported asynchronously; `kbdebug run --rerun -- ...` re-runs it "
                "with CUDA_LAUNCH_BLOCKING=1 to find the line\n"
            )

    def _diagnose(self, result: Any, source: str, origin: str) -> Any:
        """The run's output, and how it ended (a signal or a killed-by-signal status), read together."""
        from kbdebug.api import diagnose_regions
        from kbdebug.kb import RuleFileError
        from kbdebug.runtime.job_end import status_record

        ended = status_record(result.returncode, result.signal, result.core_dumped, result.lines)
        try:
            return diagnose_regions(
                result.regions,
                source=source,
                kb_dirs=self.kb,
                origin=origin,
                facts=_run_facts(self.cmd),
                extra_records=[ended] if ended is not None else (),
            )
        except RuleFileError as exc:
            fail(str(exc))

    def _render(self, diag: Any) -> str:
        from kbdebug.render import render

        return render([diag], self.fmt.value, color=self.color, width=self.width)


def parse_run_args(args: list[str]) -> dict[str, Any] | None:
    """`run`'s arguments read without typer, or None when typer must read them (help, a usage error, a form
    this reader does not know). A job wrapper starts in a few milliseconds: typer 0.29 imports pydantic to
    convert any command's parameters, most of `kbdebug run -- true`'s time; `run`'s few options are read here."""
    values: dict[str, Any] = {"rerun": None, "retry": 0, "sanitizer": None, "save": None, "fmt": TEXT, "kb": None, "report": None}
    cmd = read_options(args, FAST_OPTIONS, values, interspersed=False)
    if not cmd:
        return None
    return {"cmd": cmd, **values}


def fast_run(args: list[str]) -> int | None:
    """Run `kbdebug run ARGS` without typer; its exit status, or None to hand ARGS to typer."""
    values = parse_run_args(args)
    if values is None:
        return None
    try:
        return run_job(**values)
    except KeyboardInterrupt:
        return 130


def _compare(first, second) -> str:
    """One paragraph: where the first run surfaced the error and where the blocking run located it."""

    def where(d) -> str:
        r = d.root
        if r is None:
            return "nothing recognised"
        loc = r.facts.get("innermost_user_frame") or "no Python frame"
        kern = f", kernel {r.facts['kernel_file']}:{r.facts.get('kernel_line')}" if r.facts.get("kernel_file") else ""
        return f"{r.rule} at {loc}{kern}"

    return f"kbdebug: first run: {where(first)}\nkbdebug: with CUDA_LAUNCH_BLOCKING=1: {where(second)}"


def _run_facts(cmd: list[str]) -> "Facts":
    """What `kbdebug run` knows for the commands it suggests: the script and arguments after `python`."""
    import shlex

    if cmd and Path(cmd[0]).name.startswith("python") and len(cmd) > 1:
        return {"script": shlex.join(cmd[1:])}
    return {}
