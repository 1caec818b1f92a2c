"""Load the lark grammars in `grammars/` and parse single lines with them."""

from __future__ import annotations

from functools import cache

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from kbdebug._resources import data_dir

GRAMMARS = ("kernel_assert", "traceback", "cuda_error", "sanitizer", "oom", "distributed", "messages")


@cache
def parser(name: str) -> Lark:
    """Build the parser for `grammars/<name>.lark` once per process, only when first needed."""
    path = data_dir("grammars") / f"{name}.lark"
    return Lark(path.read_text(encoding="utf-8"), parser="earley", lexer="dynamic", start="start")


def parse(name: str, text: str) -> Tree | None:
    """Parse one line; None when the line is not of this format (never raises)."""
    try:
        return parser(name).parse(text.strip())
    except (LarkError, RecursionError):
        return None


def first_alt(tree: Tree) -> Tree:
    """The one alternative of `start` that matched."""
    for child in tree.children:
        if isinstance(child, Tree):
            return child
    return tree


def tokens(tree: Tree, kind: str | None = None) -> list[str]:
    out = []
    for tok in tree.scan_values(lambda v: isinstance(v, Token)):
        if kind is None or tok.type == kind:
            out.append(str(tok))
    return out


def token(tree: Tree, kind: str) -> str | None:
    for tok in tree.scan_values(lambda v: isinstance(v, Token) and v.type == kind):
        return str(tok)
    return None


def subtree(tree: Tree, name: str) -> Tree | None:
    for sub in tree.iter_subtrees_topdown():
        if sub.data == name:
            return sub
    return None
