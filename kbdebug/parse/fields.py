"""The base of the per-grammar transformers: a lark tree to the named fields of a record.

The grammar says what each value is, so the Python need not: a rule named after a record field
holds that field's value (`gpu_index: INT`, `kernel_file: PATH`), and every other rule merges the
fields of the rules under it. Literal tokens carry nothing; a token that is not wrapped in a field
rule is ignored, so adding a field is one grammar edit plus, where the record lacks it, one model
field. Each grammar's transformer (in the reader module of its format) adds only what a rule
cannot say by itself: a value built from several tokens, a derived value, the record to build.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token, Transformer, Tree

Fields = dict[str, Any]

_NUMBER_TYPES = frozenset({"INT", "SIGNED", "NUMBER", "SIGNED_INT", "LINENO"})  # the grammars' number terminals


def value(tok: Token) -> int | str:
    """A token's value: numbers as int (thousands separators dropped), text stripped."""
    if tok.type in _NUMBER_TYPES:
        return int(str(tok).replace(",", ""))
    return str(tok).strip()


class FieldTransformer(Transformer[Token, Any]):
    """Rules holding only tokens are fields named after the rule; rules holding rules merge them.

    A rule holding both (a template with a free-form token, e.g. `exception: EXC_TYPE ":" MESSAGE`)
    is read by a method of the grammar's transformer, which knows which token is which.
    """

    def __default__(self, data: str, children: list[Any], meta: Any) -> Fields:
        if len(children) == 1 and not isinstance(children[0], (dict, Token)):
            return {data: children[0]}  # a rule around one built value (`block: triple`)
        fields: Fields = {}
        tokens: list[Token] = []
        for child in children:
            if isinstance(child, dict):
                fields.update(child)
            elif isinstance(child, Token):
                tokens.append(child)
        if not fields and tokens:
            return {data: value(tokens[0]) if len(tokens) == 1 else [value(t) for t in tokens]}
        return fields


def template(tree: Tree) -> str:
    """The name of the alternative of `start` that matched (the template, or the line kind)."""
    for child in tree.children:
        if isinstance(child, Tree):
            return str(child.data)
    return str(tree.data)


def unquote(text: str, quotes: str = "\"'`") -> str:
    return text[1:-1] if len(text) >= 2 and text[0] in quotes and text[-1] in quotes else text


def ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]
