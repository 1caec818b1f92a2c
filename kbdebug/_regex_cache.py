"""`re.compile` with the compiled program kept between runs: what lark's lexers use as their `re` module.

Python's `re` parses a pattern and compiles it to the program its C engine runs in Python code, and that is
slow for the patterns lark makes: its contextual lexer compiles, for each parser state it meets, one
alternation of every terminal the state accepts (the messages grammar's first state: 150 terminals, 5 ms), and
a first `diagnose(exc)` meets nine such states. The program `re` builds depends only on the pattern, its flags
and the Python build, so it is kept in the cache directory (one file per pattern, keyed by all three) and read
back into the engine (`_sre.compile`, which checks a program before it runs it) at a twentieth of the cost.

A program is kept only when the pattern it makes compares equal to what `re.compile` makes of the same
pattern and flags (a Pattern's equality compares its program), and read only from a private directory (see
kbdebug._cache); anything else, a Python whose `re` works another way included, is plain `re.compile`.
kbdebug.parse.parser_cache pickles lark's parsers with this module in the place of `re`.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]  # the engine of `re`, which has no stubs
import array
import hashlib
import marshal
import os
import re
import sys
from pathlib import Path
from re import error, escape  # what lark reads from its `re` module besides `compile` and `match`
from typing import Any, AnyStr

from kbdebug._cache import _trusted, cache_dir, private_dir

__all__ = ["compile", "error", "escape", "match"]

# The Python build and engine a program was made for: a program is read back only by the same ones.
BUILD = hashlib.sha256(f"{sys.implementation.name}|{sys.version}|{_sre.MAGIC}|{_sre.CODESIZE}".encode()).hexdigest()[:16]
_CODE = {2: "H", 4: "I"}.get(_sre.CODESIZE, "")  # how a program's words are kept as bytes

_COMPILED: dict[tuple[Any, int], re.Pattern[Any]] = {}  # this process's, by (pattern, flags)
_FOLDERS: dict[Path, str | None] = {}


def compile(pattern: AnyStr | re.Pattern[AnyStr], flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(pattern, flags)`, its program read from the cache where it was kept."""
    if not isinstance(pattern, (str, bytes)):
        return re.compile(pattern, flags)
    key = (pattern, int(flags))
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = _kept(pattern, int(flags))
    return found


def match(pattern: AnyStr, string: AnyStr, flags: int = 0) -> re.Match[AnyStr] | None:
    return compile(pattern, flags).match(string)


def _folder() -> str | None:
    base = cache_dir()
    if base is None or not _CODE:
        return None
    if base not in _FOLDERS:
        where = private_dir("regex", BUILD)
        _FOLDERS[base] = None if where is None else str(where)
    return _FOLDERS[base]


def _kept(pattern: AnyStr, flags: int) -> re.Pattern[AnyStr]:
    """The compiled pattern, from its kept program where there is one (a read and the engine's check: 20-40 us,
    against 50 us to 5 ms to compile); else compiled, and its program kept."""
    folder = _folder()
    if folder is None:
        return re.compile(pattern, flags)
    path = os.path.join(folder, hashlib.sha256(repr((pattern, flags)).encode("utf-8", "surrogatepass")).hexdigest()[:32])
    try:
        if _trusted(path):
            with open(path, "rb") as fh:
                kept, kept_flags, final, code, groups, groupindex, indexgroup = marshal.loads(fh.read())
            if kept == pattern and kept_flags == flags:
                return _sre.compile(pattern, final, array.array(_CODE, code).tolist(), groups, groupindex, indexgroup)  # type: ignore[no-any-return]
    except Exception:  # absent, damaged or of another shape: compiled again
        pass
    compiled = re.compile(pattern, flags)
    program = _program(pattern, flags)
    if program is not None:
        final, code, groups, groupindex, indexgroup = program
        _write(path, marshal.dumps((pattern, flags, final, array.array(_CODE, code).tobytes(), groups, groupindex, indexgroup)))
    return compiled


def _program(pattern: str | bytes, flags: int) -> tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]] | None:
    """What `re` hands its engine for the pattern (the steps of the standard library's `re._compiler.compile`),
    or None where this Python's `re` has no such steps or they make another pattern than `re.compile` does."""
    try:
        from re import _compiler, _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern, flags)
        code = _compiler._code(parsed, flags)
        groupindex = dict(parsed.state.groupdict)
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, index in groupindex.items():
            indexgroup[index] = name
        program = (flags | parsed.state.flags, list(code), parsed.state.groups - 1, groupindex, tuple(indexgroup))
        return program if _sre.compile(pattern, *program) == re.compile(pattern, flags) else None
    except Exception:
        return None


def _write(path: str, data: bytes) -> None:
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass
