"""`kbdebug run -- CMD`: run a command, stream its output, diagnose it when it fails, re-run it blocking."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kbdebug.cli_options import Format, FormatOption, KbOption, fail, kb_dirs
from kbdebug.term import output_width, use_color

# registered by kbdebug.cli: app.command("run", context_settings=RUN_CONTEXT)(run_cmd)
RUN_CONTEXT = {"allow_interspersed_args": False, "ignore_unknown_options": True}


def run_cmd(
    cmd: Annotated[list[str], typer.Argument(help="The command to run, after `--`.", metavar="-- CMD...")],
    rerun: Annotated[
        bool | None,
        typer.Option(
            "--rerun/--no-rerun", help="Re-run once with CUDA_LAUNCH_BLOCKING=1 when the error was not localised (asks on a TTY)."
        ),
    ] = None,
    sanitizer: Annotated[
        str | None,
        typer.Option("--sanitizer", metavar="TOOL", help="Run under compute-sanitizer: memcheck, racecheck, initcheck or synccheck."),
    ] = None,
    save: Annotated[Path | None, typer.Option("--save", metavar="DIR", help="Keep the logs and diagnosis.json here.")] = None,
    fmt: FormatOption = Format.text,
    kb: KbOption = None,
) -> None:
    """Run a command, stream its output, and diagnose it if it fails. Exit status: the command's."""
    kb = kb_dirs(kb)  # `kbdebug --kb DIR run ...` too
    from kbdebug.api import diagnose_regions
    from kbdebug.kb import RuleFileError
    from kbdebug.render import render
    from kbdebug.runner import (
        RERUN_ENV,
        RunError,
        child_env,
        exit_hint,
        needs_rerun,
        new_save_dir,
        run_once,
        sanitizer_command,
        shell_quote,
        stderr_is_interactive,
        write_summary,
    )

    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        fail("no command given; use `kbdebug run -- python train.py`")
    source = shell_quote(cmd)
    color, width = use_color(sys.stderr) and fmt == Format.text, output_width(sys.stderr)
    try:
        if save is not None:
            save = new_save_dir(save)
    except OSError as exc:
        fail(f"cannot create a folder in {save}: {exc.strerror or exc}")
    try:
        argv = sanitizer_command(sanitizer, cmd) if sanitizer else cmd
        first = run_once(argv, child_env(), save, "run1")
    except RunError as exc:
        typer.echo(f"kbdebug: {exc}", err=True)
        raise typer.Exit(exc.status) from None
    except OSError as exc:
        fail(f"cannot run {cmd[0]}: {exc.strerror or exc}")
    results: list[tuple[Any, Any]] = [(first, None)]
    if first.returncode == 0 and not sanitizer:
        if save is not None:
            write_summary(save, cmd, results)
        raise typer.Exit(0)
    try:
        diag = diagnose_regions(first.regions, source=source, kb_dirs=kb, origin="run", facts=_run_facts(cmd))
    except RuleFileError as exc:
        fail(str(exc))
    results = [(first, diag)]
    out = sys.stderr
    if not diag.incidents:
        if first.returncode not in (0, 130, 143):  # not for Ctrl-C / SIGTERM: the user knows why
            hint = exit_hint(first.returncode)
            out.write(
                f"kbdebug: `{source}` exited with status {first.returncode}; nothing in its output matched a known cause"
                + (f": {hint}" if hint else "")
                + "\n"
            )
    else:
        out.write(render([diag], fmt.value, color=color, width=width))
    out.flush()
    if not sanitizer and needs_rerun(diag):
        if rerun is None and stderr_is_interactive():
            rerun = typer.confirm("kbdebug: re-run once with CUDA_LAUNCH_BLOCKING=1 to find the failing line?", default=True, err=True)
        if rerun:
            out.write("\nkbdebug: re-running with " + " ".join(f"{k}={v}" for k, v in RERUN_ENV.items()) + "\n")
            out.flush()
            second = run_once(cmd, child_env(RERUN_ENV), save, "run2")
            diag2 = diagnose_regions(
                second.regions, source=source + " (CUDA_LAUNCH_BLOCKING=1)", kb_dirs=kb, origin="rerun", facts=_run_facts(cmd)
            )
            results.append((second, diag2))
            out.write(_compare(diag, diag2) + "\n")
            if diag2.incidents:
                out.write(render([diag2], fmt.value, color=color, width=width))
            out.flush()
        elif rerun is None:
            out.write(
                "kbdebug: the error was reported asynchronously; `kbdebug run --rerun -- ...` re-runs it "
                "with CUDA_LAUNCH_BLOCKING=1 to find the line\n"
            )
    if save is not None:
        write_summary(save, cmd, results)
        out.write(f"kbdebug: logs and diagnosis.json saved in {save}\n")
    raise typer.Exit(first.returncode)


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


def _run_facts(cmd: list[str]) -> dict[str, Any]:
    """What `kbdebug run` knows for the commands it suggests: the script and arguments after `python`."""
    import shlex

    if cmd and Path(cmd[0]).name.startswith("python") and len(cmd) > 1:
        return {"script": shlex.join(cmd[1:])}
    return {}
