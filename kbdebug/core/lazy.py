"""Regexes compiled the first time they are used, not when their module is imported.

Python's `re` compiles a pattern in Python: the thirty-odd patterns of kbdebug/normalise/ cost some 5 ms of
every start, and a live exception's diagnosis (`kbdebug.diagnose(exc)`) never normalises a log. After its
first use a lazy pattern's methods are the compiled pattern's own (instance attributes), so a hot loop pays
nothing for the laziness; its program comes from kbdebug._regex_cache, kept between runs.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

_METHODS = ("match", "search", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner")


class LazyPattern:
    """A pattern and its flags until something asks it anything; then the compiled pattern's methods."""

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self.pattern, self.flags = pattern, flags

    def compiled(self) -> re.Pattern[Any]:
        # through the program cache (kbdebug._regex_cache): a run after the first reads each program back
        from kbdebug import _regex_cache

        return _regex_cache.compile(self.pattern, self.flags)

    def __getattr__(self, name: str) -> Any:  # only for what is not set yet: the first use
        compiled = self.compiled()
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        self.groups, self.groupindex = compiled.groups, compiled.groupindex
        return getattr(compiled, name)


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(pattern, flags)`, done when the pattern is first used."""
    return cast("re.Pattern[AnyStr]", LazyPattern(pattern, flags))


def compiled(rx: re.Pattern[AnyStr]) -> re.Pattern[AnyStr]:
    """The compiled pattern, lazy or not (for code that needs a real `re.Pattern`)."""
    return cast("re.Pattern[AnyStr]", rx.compiled()) if isinstance(rx, LazyPattern) else rx
