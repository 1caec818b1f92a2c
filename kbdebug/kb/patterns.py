"""Rule patterns run in linear time, whoever wrote them.

Rules come from team directories (`KBDEBUG_KNOWLEDGE`, `--kb`), so a pattern is input, not code we
control: `(a+)+$` takes Python's backtracking engine seconds on 30 characters and doubles with each
one more. Rule patterns are therefore compiled with RE2 (google-re2), which matches in time linear in
the text whatever the pattern. RE2 has no lookaround and no backreferences; a pattern that needs them is
refused at load and by `kbdebug rules lint`, with the reason, and so is a pattern with nested or
overlapping repetition (the shapes that backtrack exponentially), so that where the RE2 binding is not
installed Python's engine can run every accepted pattern safely.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Protocol


class Pattern(Protocol):
    def search(self, text: str) -> Any: ...

    def finditer(self, text: str) -> Any: ...

    @property
    def groupindex(self) -> Any: ...


class PatternError(ValueError):
    """Why a pattern cannot be used, in a sentence for `rules lint`."""


try:
    import re2 as _re2  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - the binding ships wheels for the usual platforms
    _re2 = None


@cache
def compile_pattern(pattern: str) -> Pattern:
    """The compiled pattern, guaranteed to match in linear time; PatternError if it cannot be."""
    if _re2 is not None:
        options = _re2.Options()
        options.log_errors = False
        try:
            return _re2.compile(pattern, options)  # type: ignore[no-any-return]
        except _re2.error as exc:
            reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            try:
                re.compile(pattern)
            except re.error as py_exc:
                raise PatternError(f"does not compile: {py_exc}") from None
            raise PatternError(
                f"uses a construct the linear-time matcher (RE2) does not support ({reason}); "
                "rewrite it without lookaround or backreferences"
            ) from None
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise PatternError(f"does not compile: {exc}") from None
    why = super_linear_reason(pattern)
    if why:
        raise PatternError(why)
    return compiled


def check_pattern(pattern: str) -> str:
    """For validators: the pattern itself, or ValueError with the reason it cannot be used. A pattern that
    would backtrack exponentially is refused even where RE2 would run it in linear time: the rule file must
    be safe on every install, and such a pattern is almost always a mistake."""
    try:
        compile_pattern(pattern)
    except PatternError as exc:
        raise ValueError(str(exc)) from None
    reason = super_linear_reason(pattern)
    if reason:
        raise ValueError(reason)
    return pattern


_QUANT = re.compile(r"[*+]|\{\d*,\d*\}")


def super_linear_reason(pattern: str) -> str | None:
    """Why Python's backtracking engine could take super-linear time on this pattern, or None.

    Flags the shapes behind catastrophic backtracking: a repeated group whose body repeats too
    (`(a+)+`, `(\\w*\\s?)*`), and a repeated alternation (`(a|ab)*`), which can match the same text
    in many ways.
    """
    stack: list[int] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            j = pattern.find("]", i + 2)
            i = len(pattern) if j == -1 else j + 1
            continue
        if ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            start = stack.pop()
            body = pattern[start + 1 : i]
            after = pattern[i + 1 : i + 6]
            if _QUANT.match(after):
                if _QUANT.search(re.sub(r"\\.|\[[^\]]*\]", "", body)):
                    return f"the group {pattern[start : i + 1]!r} repeats and so does its body: nested repetition backtracks exponentially"
                if "|" in re.sub(r"\\.|\[[^\]]*\]|\(\?[:=!<]", "", body):
                    return f"the alternation {pattern[start : i + 1]!r} is repeated: overlapping branches backtrack exponentially"
        i += 1
    return None
