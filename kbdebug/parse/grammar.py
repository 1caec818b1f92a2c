"""Load the lark grammars in `grammars/` and parse single lines with them."""

from __future__ import annotations

import copyreg
import hashlib
import importlib
import io
import pickle
import sys
import types
from functools import cache

import lark
from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from kbdebug._cache import cached
from kbdebug._resources import data_dir

GRAMMARS = ("kernel_assert", "traceback", "cuda_error", "sanitizer", "oom", "distributed", "messages")


def _dumps(obj: Lark) -> bytes:
    # Lark's own cache=True is LALR-only; an Earley parser pickles once modules travel by name.
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[types.ModuleType] = lambda m: (importlib.import_module, (m.__name__,))
    pickler.dump(obj)
    return buf.getvalue()


def _build(source: str) -> Lark:
    return Lark(source, parser="earley", lexer="dynamic", start="start")


@cache
def parser(name: str) -> Lark:
    """The parser for `grammars/<name>.lark`, built once and cached on disk.

    Building an Earley parser costs 10-20 ms per grammar, most of a cold `kbdebug explain`;
    unpickling it costs 1-4 ms. The cache key covers the grammar text, lark and Python, so an
    edited grammar or an upgrade never meets a stale parser; any cache problem means a rebuild.
    """
    source = (data_dir("grammars") / f"{name}.lark").read_text(encoding="utf-8")
    key = hashlib.sha256(f"{lark.__version__}|{sys.version}|{source}".encode()).hexdigest()[:20]
    return cached(name, key, Lark, lambda: _build(source), _dumps)


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
