"""The byte strings a scanner searches a large log for, derived from the grammars.

A log of gigabytes cannot be parsed line by line; the scanner searches it for short byte strings and
reads the lines around each hit. Which strings is the grammars' knowledge, not a list kept beside
them: each grammar says which of its line kinds open a record (`// scan for: ...`; a frame or a
table field is read in the context of the line that opens it), every line of such a kind holds one of
the texts `required_texts` reads off the grammar, and a small set of short substrings that covers all
those texts is chosen for each grammar (kbdebug.parse.derive.grammar_needles) and shipped in its format
folder. The scanner's needles are all of them: a new grammar brings its needles with it.

The shipped needles are read without lark (kbdebug.parse.packaged): `kbdebug run` scans a successful job's
output for them, and only a hit costs the grammars and the record classes. A grammar edited since its
needles were shipped has them derived from its text.
"""

from __future__ import annotations

from functools import cache

from kbdebug.parse import packaged
from kbdebug.parse.sources import names


@cache
def needles() -> tuple[bytes, ...]:
    """Every grammar's needles: every opening line of every grammar holds one."""
    return tuple(sorted({n for name in names() for n in _grammar_needles(name)}))


def _grammar_needles(name: str) -> tuple[bytes, ...]:
    shipped = packaged.shipped_reading(name, "needles")
    if shipped is not None:
        return shipped  # type: ignore[no-any-return]
    from kbdebug.parse.derive import grammar_needles

    return grammar_needles(name)
