"""One line read with one grammar: what the readers call, at the least cost that gives the grammar's reading.

An LALR parser reads the line first where the grammar has one (`// lalr first:`, kbdebug.parse.grammar.fast_parser):
a tenth of Earley's cost. Earley reads what LALR cannot (unless the grammar says `// earley fallback: none`), and
only a line that holds one of the texts every line of the grammar holds (kbdebug.parse.derive.required_texts):
most lines an anchor sent here are none of the grammar's, and an Earley parse that fails costs as much as one
that succeeds. Each distinct line is read once.
"""

from __future__ import annotations

from functools import cache, lru_cache

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedToken

from kbdebug.parse.derive import anchors, may_hold
from kbdebug.parse.grammar import earley_fallback, fast_parser, parser

MEMO_LINES = 4096  # distinct lines whose readings are kept: a log repeats its warnings and retried errors
MEMO_CHARS = 4096  # a longer line is parsed each time it is met: keeping it would cost more memory than it saves


def parse(name: str, text: str) -> Tree | None:
    """Parse one line; None when the line is not of this format (never raises).

    A log prints the same lines over and over (a warning every step, a retried error's traceback), and a
    parse costs a millisecond: each distinct line is parsed once per grammar, and its tree (which no reader
    changes: they transform it into new values) is handed out again."""
    text = text.strip()
    if len(text) > MEMO_CHARS:
        return _parse(name, text)
    return _memo_parse(name, text)


def _parse(name: str, text: str) -> Tree | None:
    fast = fast_parser(name)
    if fast is not None:
        try:
            tree = lalr_reading(fast, text)
            return tree if tree.data == "start" else Tree("start", tree.children)  # as the Earley parser's `start` holds it
        except (LarkError, RecursionError):
            if not earley_fallback(name):
                return None
    if not may_hold(name, text):
        return None
    try:
        return parser(name).parse(text)
    except (LarkError, RecursionError):
        return None


def lalr_reading(fast: Lark, text: str) -> Tree:
    """The LALR reading, where a line kind's free-text tail (a terminal that takes the rest of the line: the
    messages' REST after a template, a frame's CODE) begins with a token that some fixed text spells, and LALR's
    lexer, trying fixed text first, takes that: `... at non-singleton dimension 1.  Target sizes: ...` lexes its
    `.` as `cat_sizes`' `dimension 1 . Expected size` (LALR's merged lookaheads let it through to where only REST
    may follow), an IPython arrow's `--> 242   input_logits)` its `in` as a frame's keyword. Earley's dynamic
    lexer tries the free text there too and reads such a line; LALR, handed the rest of the line as that
    terminal where it accepts one, reads it as well."""
    try:
        return fast.parse(text)
    except UnexpectedToken as error:
        state = error.interactive_parser
        if state is None or error.token.type == "$END":
            raise
        # the parse table's entries for this state first (a dict lookup): what it can take next, before reductions
        # that may still fail; only where two tails could take the rest is what it accepts worked out (a parse each)
        tails = _line_tails(fast) & state.choices().keys()
        if len(tails) > 1:
            tails &= state.accepts()
        if not tails:
            raise
        state.feed_token(Token(min(tails), text[error.token.start_pos :]))
        tree: Tree = state.feed_eof()
        return tree


@cache
def _line_tails(fast: Lark) -> frozenset[str]:
    """The terminals of `fast` that take whatever is left of the line (`/.+/`)."""
    return frozenset(t.name for t in fast.terminals if t.pattern.type == "re" and t.pattern.value == ".+")


_memo_parse = lru_cache(maxsize=MEMO_LINES)(_parse)


def forget() -> None:
    """Drop the lines read so far (a benchmark timing a pass over logs it has read before)."""
    _memo_parse.cache_clear()


def parse_in(name: str, text: str) -> Tree | None:
    """`text` read as a line of grammar `name`: whole (a prefix such as the exception type is part of
    the record), else from each place in it where one of the grammar's templates may start."""
    for start in dict.fromkeys([0, *anchors(name).starts(text)]):
        tree = parse(name, text[start:])
        if tree is not None:
            return tree
    return None
