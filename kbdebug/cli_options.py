"""What the `kbdebug` commands share: their output formats, option types and the one-line usage error."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

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


KbOption = Annotated[list[Path] | None, typer.Option("--kb", metavar="DIR", help="Extra rule directory (repeatable).")]
FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
FactsOption = Annotated[
    bool,
    typer.Option("--facts", "--verbose", "-v", help="Also list every fact the diagnosis read, in the text report (JSON always has them)."),
]
ReportOption = Annotated[
    str | None,
    typer.Option(
        "--report", metavar="URL", help="Also send the log to a kbdebug crash service (`kbdebug serve`); never changes the exit status."
    ),
]


_GLOBAL_KB: list[Path] = []  # `kbdebug --kb DIR explain ...`: the group's option, read by every command


def set_global_kb(dirs: list[Path] | None) -> None:
    _GLOBAL_KB[:] = dirs or []


def kb_dirs(local: list[Path] | None) -> list[Path] | None:
    """The rule directories a command uses: those given before the command, then its own `--kb`."""
    dirs = [*_GLOBAL_KB, *(local or [])]
    return list(dict.fromkeys(dirs)) or None


def fail(message: str) -> NoReturn:
    """A usage or input error: one line on stderr, exit status 2 (never a traceback)."""
    typer.echo(f"kbdebug: {message}", err=True)
    raise typer.Exit(2)
