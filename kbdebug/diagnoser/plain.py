"""What a plain Python error names, read off its message and its failing line, the way friendly-traceback explains
one: which key, index, attribute or name failed, and in which expression of the line.

A plain error (`KeyError: 'image'`, `IndexError: list index out of range`, `'NoneType' object has no attribute
'shape'`, `'<' not supported between instances of 'float' and 'NoneType'`, `too many values to unpack (expected 2)`)
has no rule of its own: the catch-all's guide is built from these facts. Text only (a log has no
frames); kbdebug.runtime.plain_errors adds the live values (the list's length, the dict's keys) where the frame is there.
"""

from __future__ import annotations

import re
from typing import Any

from kbdebug import _regex_cache
from kbdebug.core.terminals import EXC_NAME

# An exception's own line inside a longer message (a DataLoader worker's re-raised one ends with it): its name as the
# grammars spell it (grammars/_common.lark's EXC_NAME)
_EXC_LINE = _regex_cache.compile(rf"^({EXC_NAME})(?::\s?(.*))?$")
# `base[index]`: the base an expression of names, attributes, calls and subscripts (`cfg["a"]`, `glob(p)`, a call
# of a call: `torch.load(os.path.join(d, "best.pt"))`).
_SUBSCRIPT = _regex_cache.compile(r"((?:[A-Za-z_][\w.]*)(?:\((?:[^()]|\([^()]*\))*\)|\[[^\[\]]*\])*)\[([^\[\]]+)\]")
_MARKS = _regex_cache.compile(r"\s*[~^]+\s*")  # Python 3.11's marks under the failing part of a printed line
_ATTRIBUTE_ERROR = _regex_cache.compile(r"^'([\w.]+)' object has no attribute '(\w+)'|^(module '[\w.]+') has no attribute '(\w+)'")
_NOT_SUBSCRIPTABLE = _regex_cache.compile(r"^'([\w.]+)' object is not (subscriptable|iterable|callable)")
# default_collate's type check of a batch element, and torch.stack's (collate stacks a batch's tensors): a None
# where a sample (or one of its fields) should be (torch/utils/data/_utils/collate.py, ATen's TensorList unpacking)
_NONE_IN_BATCH = _regex_cache.compile(
    r"default_collate: batch must contain .*found <class 'NoneType'>|expected Tensor as element (\d+) in argument \d+, but got NoneType"
)
# collate_tensor_fn in a DataLoader worker sizes the shared batch first: `sum(x.numel() for x in batch)` meets the None
_COLLATE_NUMEL = _regex_cache.compile(r"\bx\.numel\(\) for x in batch\b")
# Python's own wordings of a value unpacked into another number of names (ceval.c), and of an operator or a builtin
# given a None (abstract.c, object.c): the None is one of the line's operands
_UNPACK = _regex_cache.compile(r"^(too many|not enough) values to unpack \(expected (\d+)(?:, got (\d+))?\)")
_NONE_OPERAND = _regex_cache.compile(
    r"^unsupported operand type\(s\) for ([^:]+): '([\w.]+)' and '([\w.]+)'"
    r"|^'([<>=!]=?)' not supported between instances of '([\w.]+)' and '([\w.]+)'"
    r"|^object of type '(NoneType)' has no len\(\)"
)
# `for a, b in X:` and `a, b = X` (a starred name or parentheses aside): the names and the value unpacked
_FOR_TARGETS = _regex_cache.compile(r"^\s*(?:async\s+)?for\s+\(?([\w\s,*.\[\]]+?)\)?\s+in\s+(.+?):?\s*$")
_ASSIGN_TARGETS = _regex_cache.compile(r"^\s*\(?([\w\s,*.\[\]]+,[\w\s,*.\[\]]*?)\)?\s*=(?!=)\s*(.+?)\s*$")
_COMMENT = _regex_cache.compile(r"\s+#[^'\"]*$")  # a line's trailing comment (one holding no quote: not inside a string)
_CALLED = _regex_cache.compile(r"(?<![\w.\])])([A-Za-z_][\w.]*)\s*\(")  # a name or dotted name called, not a method of a call's result
_EXPR = r"[A-Za-z_][\w.]*(?:\((?:[^()]|\([^()]*\))*\)|\[[^\[\]]*\])*"
_NAME_ERROR = _regex_cache.compile(
    r"name '(\w+)' is not defined|local variable '(\w+)' referenced|cannot access (?:local|free) variable '(\w+)'"
)


def inner_error(message: str) -> dict[str, str]:
    """The exception a multi-line message re-raises (`Caught KeyError in DataLoader worker process 0.` ... `KeyError:
    'image'`): its type, message and failing line, from the traceback printed in the message."""
    lines = [ln.rstrip() for ln in message.splitlines()]
    if len(lines) < 2:
        return {}
    for k in range(len(lines) - 1, 0, -1):
        m = _EXC_LINE.match(lines[k].strip())
        if m and not lines[k].startswith(" "):
            out = {"inner_error_type": m.group(1), "inner_error_message": (m.group(2) or "").strip()}
            code = next((ln.strip() for ln in reversed(lines[:k]) if ln.startswith("    ") and not _MARKS.fullmatch(ln)), "")
            if code:
                out["inner_code"] = code
            return out
    return {}


def plain_facts(error_type: str, message: str, code: str) -> dict[str, Any]:
    """Which key, index, attribute or name of `code` (the failing line) the error names; {} when it names none."""
    kind = error_type.rsplit(".", 1)[-1]
    first = message.strip().splitlines()[0] if message.strip() else ""
    facts: dict[str, Any] = {}
    if kind == "KeyError" and first:
        facts["missing_key"] = first
        base = _subscript_of(code, lambda index: _same_literal(index, first))
        if base:
            facts["looked_up_in"] = base
    elif kind == "IndexError":
        subs = _SUBSCRIPT.findall(code)
        if subs:
            facts["indexed"] = [f"{base}[{index}]" for base, index in subs][:4]
    elif kind == "AttributeError" and (m := _ATTRIBUTE_ERROR.match(first)):
        owner_type, attribute = (m.group(1), m.group(2)) if m.group(1) else ("module", m.group(4))
        facts["attribute_of_type"], facts["missing_attribute"] = owner_type, attribute
        if m.group(3):  # `module 'torch' has no attribute 'compile'`: another version of it, or a file shadowing it
            facts["attribute_module"] = m.group(3)[len("module '") : -1]
        owner = re.search(rf"([A-Za-z_][\w.]*(?:\([^()]*\)|\[[^\[\]]*\])*)\.{attribute}\b", code)
        if owner:
            facts["attribute_of"] = owner.group(1)
        if owner_type == "NoneType" and _COLLATE_NUMEL.search(code):
            facts["none_in_batch"] = True
    elif kind == "TypeError" and (m := _NOT_SUBSCRIPTABLE.match(first)):
        facts["attribute_of_type"] = m.group(1)
        base = _subscript_of(code, lambda index: True) if m.group(2) == "subscriptable" else None
        if m.group(2) == "callable":  # the name called, where the line calls only one (`pbar = tqdm(loader)`)
            called = set(_CALLED.findall(_COMMENT.sub("", code)))
            base = called.pop() if len(called) == 1 else None
        if base:
            facts["attribute_of"] = base
    elif kind in ("NameError", "UnboundLocalError") and (m := _NAME_ERROR.search(first)):
        facts["undefined_name"] = next(g for g in m.groups() if g)
    elif kind == "TypeError" and (m := _NONE_IN_BATCH.search(first)):
        facts["none_in_batch"] = True
        if m.group(1) is not None:
            facts["none_element"] = int(m.group(1))
    elif kind == "TypeError" and (m := _NONE_OPERAND.match(first)):
        facts.update(_none_operand(m, code))
    elif kind == "ValueError" and (m := _UNPACK.match(first)):
        facts.update(_unpacking(m, code))
    return facts


def _none_operand(m: re.Match[str], code: str) -> dict[str, Any]:
    """An operator, a comparison or len() given a None: the operand that is None, where the line shows it."""
    if m.group(7):  # object of type 'NoneType' has no len()
        inner = re.search(rf"\blen\(\s*({_EXPR})\s*\)", code)
        return {"attribute_of_type": "NoneType", **({"attribute_of": inner.group(1)} if inner else {})}
    op, left, right = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5), m.group(6))
    if "NoneType" not in (left, right):
        return {}
    out: dict[str, Any] = {"attribute_of_type": "NoneType"}
    op = op.strip()
    at = code.find(f" {op} ")  # `total += loss` too: an augmented assignment's target is its left operand
    if at >= 0:
        before = re.search(rf"({_EXPR})\s*$", code[:at])
        after = re.match(rf"\s*({_EXPR})", code[at + len(op) + 2 :])
        side = before if left == "NoneType" else after
        if side:
            out["attribute_of"] = side.group(1)
    return out


def _unpacking(m: re.Match[str], code: str) -> dict[str, Any]:
    """A value unpacked into another number of names: how many the line takes, how many it held (when Python says),
    the names and the value, and whether each item of a loop is unpacked."""
    out: dict[str, Any] = {"unpack_expected": int(m.group(2))}
    if m.group(3):
        out["unpack_got"] = int(m.group(3))
    code = _COMMENT.sub("", code)
    loop = _FOR_TARGETS.match(code)
    target = loop or _ASSIGN_TARGETS.match(code)
    if target:
        names = ", ".join(n.strip() for n in target.group(1).split(",") if n.strip())
        out.update(unpack_targets=names, unpacked=target.group(2).rstrip(":").strip(), unpack_loop=bool(loop))
    return out


def _subscript_of(code: str, fits: Any) -> str | None:
    """The base of the first subscript of `code` whose index `fits`."""
    return next((base for base, index in _SUBSCRIPT.findall(code) if fits(index)), None)


def _same_literal(index: str, key: str) -> bool:
    """Whether a subscript's index is the literal a KeyError printed (`"image"` for `'image'`, `7` for `7`)."""
    strip = index.strip()
    return strip == key or strip.strip("\"'") == key.strip("\"'") and strip[:1] in "\"'" and key[:1] in "\"'"
