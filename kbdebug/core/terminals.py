"""The terminals of `grammars/_common.lark` that code below the parsers needs too, read from there, so a
pattern the grammars share has one spelling: `EXC_NAME`, the name of an exception class, and
`TRACEBACK_HEADER` are what start an exception's lines for the grammars and for the code that cuts, joins
and marks lines before they are parsed (kbdebug/normalise/) or after (the evidence lines)."""

from __future__ import annotations

import re
from functools import cache

from kbdebug import _regex_cache
from kbdebug._resources import data_dir

# `NAME: /regex/flags` (a terminal written as one regex; `NAME.2` with a priority)
_REGEX_TERMINAL = _regex_cache.compile(r"^([A-Z_][A-Z0-9_]*)(?:\.\d+)?\s*:\s*/(.*)/([imslux]*)\s*$", re.M)


@cache
def terminal(name: str) -> str:
    """The regex of terminal `name` in grammars/_common.lark."""
    text = (data_dir("grammars") / "_common.lark").read_text(encoding="utf-8")
    for m in _REGEX_TERMINAL.finditer(text):
        if m.group(1) == name:
            return f"(?{m.group(3)}:{m.group(2)})" if m.group(3) else f"(?:{m.group(2)})"
    raise LookupError(f"grammars/_common.lark defines no regex terminal {name}")


EXC_NAME = terminal("EXC_NAME")
TRACEBACK_HEADER = terminal("TRACEBACK_HEADER")
