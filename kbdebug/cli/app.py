"""The `kbdebug` command: explain logs, print parsed records, list and lint rules."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kbdebug._version import __version__
from kbdebug.cli.explain import InputError, explain_logs, quiet_start, regions_for
from kbdebug.cli.help import Typer
from kbdebug.cli.options import (
    TEXT,
    FactsOption,
    FormatOption,
    KbOption,
    ParseFormat,
    ReportOption,
    fail,
    fast_command,
    kb_dirs,
    set_global_kb,
)
from kbdebug.cli.run import RUN_CONTEXT, typer_command
from kbdebug.cli.serve import serve_cmd
from kbdebug.core.term import output_width

# The CLI imports the pipeline only inside commands: `--version` and `-h` stay fast.

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
    raise typer.Exit(explain_logs(files, fmt, quiet, kb, report, facts))  # kbdebug/cli/explain.py


app.command("run", context_settings=RUN_CONTEXT)(typer_command())  # kbdebug/cli/run.py
app.command("serve")(serve_cmd)  # kbdebug/cli/serve.py (the crash service, extra kbdebug[server])


@app.command("parse")
def parse_cmd(
    file: Annotated[str, typer.Argument(metavar="FILE", help="Log file, or - for standard input.")],
    fmt: Annotated[ParseFormat, typer.Option("--format", "-f", help="Output format.")] = ParseFormat.text,
) -> None:
    """Print the records the grammars read from a log (for debugging grammars)."""
    from kbdebug.parse.regions import parse_regions

    try:
        regions = regions_for(file, passthrough=False)
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
    fast = fast_command(sys.argv[1:])  # `run` and `explain` in their plain forms: without typer (cli_options)
    if fast is not None:
        sys.exit(fast)
    if sys.argv[1:2] == ["explain"]:
        quiet_start()
    elif hasattr(signal, "SIGPIPE") and sys.argv[1:2] not in (["serve"], ["run"]):
        # a command that prints ends quietly on a closed pipe (`kbdebug rules | head`), as `cat` does; never the
        # service (a client that hangs up before its answer would kill it) nor the job wrapper (which goes on
        # copying the job's output to its logs when our stdout is gone): Python's default ignores SIGPIPE
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


if __name__ == "__main__":
    main()
