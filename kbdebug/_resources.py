"""Locate the data directories (grammars/, knowledge/) in a checkout and in an installed wheel."""

from __future__ import annotations

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
