"""What the `kbdebug` commands share: their output formats, option types and the one-line usage error.

Importing this module does not import typer (30 ms of a job wrapper's start, see cli_run.fast_run): the
option types that need it are built when a command module asks for them (`__getattr__`).
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

from kbdebug._resources import output_formats

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: what StrEnum adds for these choices is str() giving the value

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)


# kbdebug.render's formats, read off its templates without importing it (it is heavy); an Enum so help and
# completion list them.
Format = StrEnum("Format", {name: name for name in output_formats()})  # type: ignore[misc]
TEXT = Format("text")  # the default: the terminal's guide


class ParseFormat(StrEnum):
    text = "text"
    json = "json"


def _options() -> dict[str, Any]:
    import typer

    return {
        "KbOption": Annotated[list[Path] | None, typer.Option("--kb", metavar="DIR", help="Extra rule directory (repeatable).")],
        "FormatOption": Annotated[Format, typer.Option("--format", "-f", help="Output format.")],
        "FactsOption": Annotated[
            bool,
            typer.Option(
                "--facts", "--verbose", "-v", help="Also list every fact the diagnosis read, in the text report (JSON always has them)."
            ),
        ],
        "ReportOption": Annotated[
            str | None,
            typer.Option(
                "--report",
                metavar="URL",
                help="Also send the log to a kbdebug crash service (`kbdebug serve`); never changes the exit status.",
            ),
        ],
    }


if TYPE_CHECKING:
    KbOption = list[Path] | None
    FormatOption = Format
    ReportOption = str | None
    FactsOption = bool
else:

    def __getattr__(name: str) -> Any:
        if name not in ("KbOption", "FormatOption", "ReportOption", "FactsOption"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        options = _options()
        globals().update(options)
        return options[name]


_GLOBAL_KB: list[Path] = []  # `kbdebug --kb DIR explain ...`: the group's option, read by every command


def set_global_kb(dirs: list[Path] | None) -> None:
    _GLOBAL_KB[:] = dirs or []


def kb_dirs(local: list[Path] | None) -> list[Path] | None:
    """The rule directories a command uses: those given before the command, then its own `--kb`."""
    dirs = [*_GLOBAL_KB, *(local or [])]
    return list(dict.fromkeys(dirs)) or None


def read_options(args: list[str], table: dict[str, tuple[str, str]], values: dict[str, Any], interspersed: bool) -> list[str] | None:
    """A command's plain options read without typer into `values` (`table`: option -> (parameter, kind)); the
    arguments that are not options, or None when typer must read them (help, a usage error, a form this
    reader does not know). `interspersed`: options may follow arguments (`explain LOG -f json`); else the
    first argument ends the options (`run --retry 2 -- CMD --its-own-options`)."""
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return rest + args[i + 1 :]
        if not arg.startswith("-") or arg == "-":
            if not interspersed:
                return rest + args[i:]
            rest.append(arg)
            i += 1
            continue
        name, eq, value = arg.partition("=")
        option = table.get(name)
        if option is None:
            return None
        key, kind = option
        if kind in ("true", "false"):
            if eq:
                return None
            values[key] = kind == "true"
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if kind == "count":
            if not value.isdigit():
                return None
            values[key] = int(value)
        elif kind == "format":
            if value not in Format.__members__:
                return None
            values[key] = Format(value)
        elif kind == "paths":
            values[key] = [*(values[key] or []), Path(value)]
        else:
            values[key] = Path(value) if kind == "path" else value
    return rest


def fast_command(argv: list[str]) -> int | None:
    """`kbdebug run ...` and `kbdebug explain ...` in their plain forms, without typer (30 ms of a cold start,
    and typer 0.29 imports pydantic to convert parameters); their exit status, or None: typer reads argv."""
    if argv[:1] == ["run"]:
        from kbdebug.cli.run import fast_run

        return fast_run(argv[1:])
    if argv[:1] == ["explain"]:
        from kbdebug.cli.explain import fast_explain

        return fast_explain(argv[1:])
    return None


def fail(message: str) -> NoReturn:
    """A usage or input error: one line on stderr, exit status 2 (never a traceback)."""
    sys.stderr.write(f"kbdebug: {message}\n")
    sys.stderr.flush()
    raise SystemExit(2)
