"""The base of the per-grammar transformers: a lark tree to the named fields of a record.

The grammar says what each value is, so the Python need not: a rule named after a record field
holds that field's value (`gpu_index: INT`, `kernel_file: PATH`), and every other rule merges the
fields of the rules under it. Literal tokens carry nothing; a token that is not wrapped in a field
rule is ignored, so adding a field is one grammar edit plus, where the record lacks it, one model
field. Each grammar's transformer (in the reader module of its format) adds only what a rule
cannot say by itself: a value built from several tokens, a derived value, the record to build.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, Tree
from lark.exceptions import GrammarError, VisitError
from lark.visitors import Discard

from kbdebug.parse.derive import templates

Fields = dict[str, Any]

_NUMBER_TYPES = frozenset({"INT", "SIGNED", "NUMBER", "SIGNED_INT", "LINENO"})  # the grammars' number terminals


def value(tok: Token) -> int | float | str:
    """A token's value: numbers as int, or float where they hold a fraction (`2.0`; thousands separators
    dropped), text stripped."""
    if tok.type in _NUMBER_TYPES:
        number = str(tok).replace(",", "")
        return float(number) if "." in number else int(number)
    return str(tok).strip()


class FieldTransformer(Transformer[Token, Any]):
    """Rules holding only tokens are fields named after the rule; rules holding rules merge them.

    A rule holding both (a template with a free-form token, e.g. `exception: EXC_TYPE ":" MESSAGE`)
    is read by a method of the grammar's transformer, which knows which token is which.
    """

    grammar: str | None = None  # set by a subclass: its templates (alternatives of `start`) merge their fields

    def __init__(self) -> None:
        super().__init__()
        self.templates = templates(self.grammar) if self.grammar else frozenset()

    def __default__(self, data: str, children: list[Any], meta: Any) -> Fields:
        if data in self.templates:
            return merge(children)
        if len(children) == 1 and not isinstance(children[0], (dict, Token)):
            return {data: children[0]}  # a rule around one built value (`block: triple`)
        tokens = [c for c in children if isinstance(c, Token)]
        if tokens and not any(isinstance(c, dict) for c in children):
            return {data: value(tokens[0]) if len(tokens) == 1 else [value(t) for t in tokens]}
        return merge(children)

    def transform(self, tree: Tree) -> Any:
        """lark's `Transformer.transform`, the same calls made in the same order, at a third of its cost: lark looks
        for a method named after each rule and token by catching AttributeError, and most of them have none (a
        field rule is read by `__default__`, a token is kept as it is), so a line of twenty tokens raised and
        caught thirty exceptions."""
        res = self._tree(tree)
        return None if res is Discard else res

    def _tree(self, tree: Tree) -> Any:
        children = []
        for c in tree.children:
            if isinstance(c, Tree):
                res = self._tree(c)
            elif isinstance(c, Token):
                f = getattr(self, c.type, None)
                res = c if f is None else _visit(f, c.type, c, c)
            else:
                res = c
            if res is not Discard:
                children.append(res)
        f = getattr(self, tree.data, None)
        if f is None:
            return self.__default__(tree.data, children, tree.meta)
        wrapper = getattr(f, "visit_wrapper", None)
        if wrapper is not None:
            return _visit(lambda ch: f.visit_wrapper(f, tree.data, ch, tree.meta), tree.data, tree, children)
        return _visit(f, tree.data, tree, children)

    def read(self, tree: Tree) -> Fields:
        """The fields of a parsed line, and `template`: the alternative of `start` that matched."""
        fields = self.transform(tree)
        fields["template"] = next((str(c.data) for c in tree.children if isinstance(c, Tree)), str(tree.data))
        return fields


def _visit(f: Any, name: str, obj: Any, arg: Any) -> Any:
    """A transformer's method called as lark calls it: an error in it raised as lark's VisitError."""
    try:
        return f(arg)
    except GrammarError:
        raise
    except Exception as e:
        raise VisitError(name, obj, e) from e


def merge(children: list[Any]) -> Fields:
    fields: Fields = {}
    for child in children:
        if isinstance(child, dict):
            fields.update(child)
    return fields


def unquote(text: str, quotes: str = "\"'`") -> str:
    return text[1:-1] if len(text) >= 2 and text[0] in quotes and text[-1] in quotes else text
