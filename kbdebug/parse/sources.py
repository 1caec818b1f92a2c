"""Where the grammars are and what their files say: their names, folders, text and header directives.

Kept apart from kbdebug.parse.grammar, which builds parsers with lark: the scanner's needles and the
readings shipped beside each grammar are found by these alone, so a job wrapper that only scans its child's
output never imports lark.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from kbdebug._resources import data_dir

COMMON = "_common"  # the shared terminals, at the top of grammars/


@cache
def files() -> dict[str, Path]:
    """Every grammar by name (its file's stem), folder by folder: the grammars are the folders' own files,
    so a new format's grammar is found where it is put."""
    root = data_dir("grammars")
    found = {p.stem: p for p in sorted(root.glob("*/*.lark"))}
    return {COMMON: root / f"{COMMON}.lark", **found}


def names() -> tuple[str, ...]:
    """The grammars of the formats (the shared `_common` is none)."""
    return tuple(name for name in files() if name != COMMON)


def folder(name: str) -> Path:
    """The format folder that holds grammar `name`."""
    return files()[name].parent


@cache
def source(name: str) -> str:
    """The text of grammar `name` (read once per process: the parser, its cache key and the readings of
    kbdebug.parse.derive all need it)."""
    return files()[name].read_text(encoding="utf-8")


def directive(text: str, key: str) -> list[str] | None:
    """The words of a grammar's `// KEY: word word (why)` comment (the reason in parentheses dropped), or
    None without one: `parser`, `scan for`, `own line` say what the grammar is to the code that reads it."""
    m = re.search(rf"^//\s*{re.escape(key)}:\s*(.*)$", text, re.M)
    return m.group(1).split("(")[0].split() if m else None
