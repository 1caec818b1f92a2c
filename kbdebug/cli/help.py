"""How kbdebug's help shows its parameters: metavars and choices, never Python types.

typer 0.29's rich help gives every parameter a type column: `FILE...  <list[str]>`, `--quiet  <bool>`,
`--help  <bool>`; an argument's metavar names it but does not replace that column (fastapi/typer#1410), and
the usage line reads `{FILE...}...`. A user needs to know what to type, so kbdebug's help shows
- an argument: its metavar, as declared (`FILE...`, `RULE_ID`), in the help and on the usage line;
- a flag (`--quiet`, `--help`, `--rerun/--no-rerun`, `--version`): nothing after it;
- an option that takes a value: its metavar (`DIR`), or its choices (`<text|markdown|json|html>`).

This is the one place that says so. `Typer` below gives every group and command it makes (`cls=`, typer's
documented hook for custom command classes) a class that presents its parameters that way when help or
usage is built; the parameters parse exactly as typer made them.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


class _Argument(TyperArgument):
    """A positional argument shown by its metavar alone. Adds no state: only the help differs."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.metavar or (self.name or "").upper()
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return [name if self.required else f"[{name}]"]


class _Flag(TyperOption):
    """An option that takes no value (a flag or a counter): nothing is shown after its names."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _shown_as_typed(params: list[Any]) -> list[Any]:
    """The same parameter objects (parsing relies on their identity), each presented as the module says."""
    for param in params:
        if isinstance(param, TyperArgument) and not isinstance(param, _Argument):
            param.__class__ = _Argument
        elif isinstance(param, TyperOption) and not isinstance(param, _Flag) and (param.is_flag or param.count):
            param.__class__ = _Flag
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _shown_as_typed(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _shown_as_typed(super().get_params(ctx))


class Typer(typer.Typer):
    """typer.Typer whose groups and commands show metavars and choices in their help (see the module)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_Group, **kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Any:
        return super().command(name, cls=_Command, **kwargs)
