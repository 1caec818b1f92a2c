"""Locate the data directories (grammars/, knowledge/) in a checkout and in an installed wheel."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the directory holding `name`: inside the package when installed, beside it in a checkout."""
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"kbdebug data directory {name!r} is missing from {_PKG}")


_LISTED = re.compile(r"output format, listed (\d+)")


@cache
def output_formats() -> tuple[str, ...]:
    """The output formats: one per `report.NAME.j2` in kbdebug/render/templates (a format is its templates
    there, nothing else), in the order their first line lists them. Read without importing the renderer."""
    found: list[tuple[int, str]] = []
    for path in (_PKG / "render" / "templates").glob("report.*.j2"):
        with path.open(encoding="utf-8") as fh:
            listed = _LISTED.search(fh.readline())
        found.append((int(listed.group(1)) if listed else 99, path.name[len("report.") : -len(".j2")]))
    return tuple(name for _, name in sorted(found))
