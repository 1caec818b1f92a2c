"""The `kbdebug` command: explain logs, print parsed records, list and lint rules."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from kbdebug._version import __version__
from kbdebug.cli_help import Typer
from kbdebug.cli_options import (
    TEXT,
    FactsOption,
    Format,
    FormatOption,
    KbOption,
    ParseFormat,
    ReportOption,
    fail,
    kb_dirs,
    set_global_kb,
)
from kbdebug.cli_run import RUN_CONTEXT, run_cmd
from kbdebug.cli_serve import serve_cmd
from kbdebug.cli_status import STDIN_NOTHING, exit_status
from kbdebug.term import output_width, use_color

if TYPE_CHECKING:  # the CLI imports the pipeline only inside commands: `--version` and `-h` stay fast
    from kbdebug.diagnosis import Diagnosis


_CONTEXT = {"help_option_names": ["-h", "--help"]}
app = Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings=_CONTEXT,
    help="Turn the output of a crashed PyTorch/CUDA program into a diagnosis and a fix guide.",
)
rules_app = Typer(no_args_is_help=True, context_settings=_CONTEXT, help="List, show and lint the rule knowledge base.")
app.add_typer(rules_app, name="rules")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kbdebug {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
    kb: KbOption = None,
) -> None:
    """Turn the output of a crashed PyTorch/CUDA program into a diagnosis and a fix guide."""
    set_global_kb(kb)  # `kbdebug --kb DIR explain` as well as `kbdebug explain --kb DIR`


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


def _regions_for(path: str, passthrough: bool, grep=None, to_stderr: bool = False):
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_path

    if path == "-":
        return _read_stdin(passthrough, to_stderr)
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a directory")
    try:
        return scan_path(p, needles, grep=grep)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


@app.command()
def explain(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="Log files, directories or globs, or - for standard input.")],
    fmt: FormatOption = TEXT,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not pass standard input through.")] = False,
    kb: KbOption = None,
    report: ReportOption = None,
    facts: FactsOption = False,
) -> None:
    """Diagnose crash logs. Exit status: 0 a named cause, 3 only the catch-all `other`, 1 nothing recognised, 2 usage/input
    error; passing a run through (`cmd 2>&1 | kbdebug explain -`, no -q) 0 and 1 trade places, so a crash fails CI."""
    kb = kb_dirs(kb)
    if files.count("-") > 1:
        fail("standard input can be named only once")
    if len(files) > 1 or any(os.path.isdir(f) or (any(c in f for c in "*?[") and not os.path.exists(f)) for f in files):
        _explain_many(files, fmt, quiet, kb, report, facts)
    from kbdebug.parse.needles import needles
    from kbdebug.scan import start_grep

    greps = {path: start_grep(path, needles) for path in dict.fromkeys(files) if path != "-"}  # runs while we import
    from kbdebug.api import diagnose_regions
    from kbdebug.kb import RuleFileError, load_kb
    from kbdebug.render import render

    _settle()

    diags, logs = [], []
    try:
        for path in files:
            regions = _regions_for(path, passthrough=not quiet, grep=greps.pop(path, None), to_stderr=fmt != "text")
            diags.append(diagnose_regions(regions, source=path, kb_dirs=kb))
            logs.append((path, regions))
        base = load_kb(kb)
    except (InputError, RuleFileError) as exc:
        fail(str(exc))
    passed_through = files == ["-"] and not quiet  # kbdebug is a filter in the run's pipeline (cli_status)
    if files == ["-"] and not any(d.incidents for d in diags):
        typer.echo(STDIN_NOTHING, err=True)
        if passed_through and fmt == "text":  # the clean run's verdict is on stderr; stdout stays the run's output
            raise typer.Exit(exit_status(diags, base, passed_through))
    sys.stdout.write(render(diags, fmt.value, color=use_color(sys.stdout) and fmt == "text", width=output_width(sys.stdout), facts=facts))
    sys.stdout.flush()
    if report:
        _report(report, logs)
    raise typer.Exit(exit_status(diags, base, passed_through))


def _explain_many(
    files: list[str], fmt: Format, quiet: bool, kb: list[Path] | None, report: str | None = None, facts: bool = False
) -> NoReturn:
    """Many logs: each diagnosis as it is ready (JSON: one object per line; HTML: sections of one document),
    then the crashes grouped by signature."""
    from kbdebug.batch import expand, is_text_log
    from kbdebug.kb import RuleFileError, load_kb
    from kbdebug.render import render
    from kbdebug.render.summary import render_summary

    _settle()
    named = set(files)
    paths = expand(files)
    for path in paths:
        if path != "-" and not os.path.isfile(path):
            fail(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a regular file")
    binary = [p for p in paths if p != "-" and p not in named and not is_text_log(p)]
    if binary:  # found in a directory or by a glob: a checkpoint or an image is not a log
        shown = ", ".join(binary[:5]) + (f" and {len(binary) - 5} more" if len(binary) > 5 else "")
        typer.echo(f"kbdebug: skipped {len(binary)} binary file{'s' * (len(binary) != 1)} (not a text log): {shown}", err=True)
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
    raise typer.Exit(exit_status(diags, base, passed_through=False))


def _report(url: str, logs: list[tuple[str, Any]]) -> None:
    """`--report URL`: each log to the crash service, after the local output (kbdebug/reporting.py)."""
    from kbdebug.reporting import report_logs

    report_logs(url, logs)


def _each(paths: list[str], quiet: bool, kb: list[Path] | None, to_stderr: bool) -> Iterator[Diagnosis]:
    from kbdebug.api import diagnose_regions
    from kbdebug.batch import diagnose_files

    if "-" in paths:  # standard input is read here, in order, with the files around it
        for path in paths:
            if path == "-":
                yield diagnose_regions(_regions_for(path, passthrough=not quiet, to_stderr=to_stderr), source=path, kb_dirs=kb)
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


app.command("run", context_settings=RUN_CONTEXT)(run_cmd)  # kbdebug/cli_run.py
app.command("serve")(serve_cmd)  # kbdebug/cli_serve.py (the crash service, extra kbdebug[server])


@app.command("parse")
def parse_cmd(
    file: Annotated[str, typer.Argument(metavar="FILE", help="Log file, or - for standard input.")],
    fmt: Annotated[ParseFormat, typer.Option("--format", "-f", help="Output format.")] = ParseFormat.text,
) -> None:
    """Print the records the grammars read from a log (for debugging grammars)."""
    from kbdebug.parse import parse_regions

    try:
        regions = _regions_for(file, passthrough=False)
    except InputError as exc:
        fail(str(exc))
    records = _without_unmatched_guesses(parse_regions(regions))
    if fmt == ParseFormat.json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2, ensure_ascii=False))
    else:
        for r in records:
            data = r.model_dump(mode="json", exclude={"raw"}, exclude_defaults=True)
            typer.echo(f"{r.first_line:>6}  {r.kind:<18} {json.dumps(data, ensure_ascii=False)}")
    raise typer.Exit(0 if records else 1)


def _without_unmatched_guesses(records: list[Any]) -> list[Any]:
    """Where no format was recognised, the parser offers a region's last lines as an error message whose type
    was not pasted (`Target 14 is out of bounds.`); a clean log's `error rate: 0.05` is one too. Such a guess
    is a record only when a rule recognises it: otherwise `parse` would call a clean log an exception."""
    guesses = [r for r in records if r.kind == "exception" and not r.exc_type and not r.frames]
    if not guesses:
        return records
    from kbdebug.diagnoser.match import diagnose_records
    from kbdebug.kb import load_kb

    incidents = diagnose_records(list(records), load_kb(kb_dirs(None)))
    used = {id(rec) for inc in incidents for rec in inc.records}
    return [r for r in records if r not in guesses or id(r) in used]


@rules_app.command("list")
def rules_list(kb: KbOption = None) -> None:
    """List every rule with its priority and title."""
    from kbdebug.kb import RuleFileError, load_kb

    try:
        base = load_kb(kb_dirs(kb))
    except RuleFileError as exc:
        fail(str(exc))
    for rule in sorted(base.rules, key=lambda r: r.id):
        typer.echo(f"{rule.id:<28} {rule.priority:>3}  {rule.title}")


@rules_app.command("show")
def rules_show(
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID", help="A rule id, as `kbdebug rules list` prints it.")],
    kb: KbOption = None,
    fmt: FormatOption = TEXT,
) -> None:
    """Show what a rule matches, its examples, and its guide rendered on its first positive example."""
    from kbdebug.authoring.show import show_rule
    from kbdebug.kb import RuleFileError, load_kb

    try:
        base = load_kb(kb)
    except RuleFileError as exc:
        fail(str(exc))
    rule = base.get(rule_id)
    if rule is None:
        fail(f"no rule {rule_id!r}; see `kbdebug rules list`")
    sys.stdout.write(show_rule(rule, base, kb, fmt.value, width=output_width(sys.stdout)))


@rules_app.command("lint")
def rules_lint(path: Annotated[Path, typer.Argument(metavar="PATH", help="A directory of rule files (*.toml), or one rule file.")]) -> None:
    """Check every rule file in PATH and list every problem (file: field: sentence); exit 1 if any, 2 if PATH is missing."""
    from kbdebug.authoring.lint import lint_directory

    if not path.exists():
        fail(f"{path}: no such rule file or directory")
    warnings: list[str] = []
    problems = lint_directory(path, warnings)
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    for p in problems:
        typer.echo(p)
    if problems:
        files = len({p.split(": ", 1)[0] for p in problems})
        typer.echo(f"{len(problems)} problem{'s' * (len(problems) != 1)} in {files} file{'s' * (files != 1)}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{path}: all rule files valid" + (f" ({len(warnings)} warning{'s' * (len(warnings) != 1)})" if warnings else ""))


def main() -> None:
    if sys.argv[1:2] == ["run"]:  # a job wrapper's start must cost its job nothing: see cli_run.parse_run_args
        from kbdebug.cli_run import fast_run

        fast = fast_run(sys.argv[2:])
        if fast is not None:
            sys.exit(fast)
    explaining = len(sys.argv) > 1 and sys.argv[1] == "explain"
    if explaining:  # a short run: no collections while start-up builds long-lived objects (see _settle)
        gc.disable()
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:  # typer 0.29 carries its own copy of click; older typers use click itself
        from typer._click import exceptions as errors
    except ImportError:
        from click import exceptions as errors  # type: ignore[no-redef]

    try:
        status = app(standalone_mode=False)
    except errors.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "kbdebug -h", err=True)
        sys.exit(2)
    except errors.UsageError as exc:  # one line, like every other error of kbdebug's, not a boxed panel
        command = exc.ctx.command_path if exc.ctx else "kbdebug"
        message = exc.format_message().replace("Value error, ", "")
        typer.echo(f"kbdebug: {message} (see `{command} -h`)", err=True)
        sys.exit(2)
    except errors.ClickException as exc:
        typer.echo(f"kbdebug: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)


def _settle() -> None:
    """After the imports: the models, parsers and templates built so far live until exit, so the collector
    need never scan them again (`gc.freeze`); collections resume for what the diagnosis allocates."""
    gc.freeze()
    gc.enable()


if __name__ == "__main__":
    main()
