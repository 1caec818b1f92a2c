"""The floor kbdebug's cold start is measured against: the smallest real program of the same kind.

A typer CLI with the same `explain PATH --format F` arguments that reads the file, parses one line
with a three-rule lark grammar into a pydantic model with one field pair, and renders it with a
one-line jinja2 template. `--in-process` times the same work inside an already running process
(the floor for the first `diagnose(exc)` after torch is imported).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

GRAMMAR = r"""
start: kind ":" text
kind: /[A-Za-z_.]+/
text: /.+/
%ignore " "
"""


def work(path: str, fmt: str) -> str:
    import jinja2
    import lark
    import pydantic

    class Line(pydantic.BaseModel):
        kind: str
        text: str

    with open(path, encoding="utf-8", errors="replace") as fh:
        last = [ln for ln in fh.read().splitlines() if ln.split(":")[0].replace(".", "").replace("_", "").isalpha()][-1]
    tree = lark.Lark(GRAMMAR, parser="lalr").parse(last)
    rec = Line(kind=str(tree.children[0].children[0]), text=str(tree.children[1].children[0]).strip())
    return jinja2.Template("{{ fmt }}: {{ rec.kind }} {{ rec.text }}").render(fmt=fmt, rec=rec)


def cli() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.command()
    def explain(path: str, format: Annotated[str, typer.Option("--format")] = "text") -> None:
        typer.echo(work(path, format))

    @app.command()
    def version() -> None:  # a second command, so typer keeps `explain` as a subcommand like kbdebug's
        typer.echo("0")

    app()


if __name__ == "__main__":
    cli()
    sys.exit(0)
