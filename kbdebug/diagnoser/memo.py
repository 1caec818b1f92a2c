"""What the match stage reads off the rule models, made once and kept in the shape its loops run over, and the
compiled patterns of rules' fields and phrases."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import cache
from typing import Any, TypeVar, cast

from kbdebug.kb.patterns import Pattern, compile_pattern

T = TypeVar("T")


def kept(table: dict[Hashable, tuple[object, Any]], owner: object, make: Callable[[], T], *more: Hashable) -> T:
    """`make()`, made once per `owner` (a rule, a template, a knowledge base: compared by identity, so an object
    built again in its place is read again) and `more`: what the match stage reads off the models, kept in the
    shape its loops run over."""
    key = (id(owner), *more)
    kept = table.get(key)
    if kept is None or kept[0] is not owner:
        kept = table[key] = (owner, make())
    return cast(T, kept[1])


@cache
def rx(pattern: str) -> Pattern:
    return compile_pattern(pattern)
