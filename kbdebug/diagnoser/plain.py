"""What a plain Python error names, read off its message and its failing line, the way friendly-traceback explains
one: which key, index, attribute or name failed, and in which expression of the line.

A plain error (`KeyError: 'image'`, `IndexError: list index out of range`, `'NoneType' object has no attribute
'shape'`) has no rule of its own: the catch-all's guide is built from these facts. Text only (a log has no
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
        owner_type, attribute = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        facts["attribute_of_type"], facts["missing_attribute"] = owner_type, attribute
        owner = re.search(rf"([A-Za-z_][\w.]*(?:\([^()]*\)|\[[^\[\]]*\])*)\.{attribute}\b", code)
        if owner:
            facts["attribute_of"] = owner.group(1)
        if owner_type == "NoneType" and _COLLATE_NUMEL.search(code):
            facts["none_in_batch"] = True
    elif kind == "TypeError" and (m := _NOT_SUBSCRIPTABLE.match(first)):
        facts["attribute_of_type"] = m.group(1)
        base = _subscript_of(code, lambda index: True) if m.group(2) == "subscriptable" else None
        if base:
            facts["attribute_of"] = base
    elif kind in ("NameError", "UnboundLocalError") and (m := _NAME_ERROR.search(first)):
        facts["undefined_name"] = next(g for g in m.groups() if g)
    elif kind == "TypeError" and (m := _NONE_IN_BATCH.search(first)):
        facts["none_in_batch"] = True
        if m.group(1) is not None:
            facts["none_element"] = int(m.group(1))
    return facts


def _subscript_of(code: str, fits: Any) -> str | None:
    """The base of the first subscript of `code` whose index `fits`."""
    return next((base for base, index in _SUBSCRIPT.findall(code) if fits(index)), None)


def _same_literal(index: str, key: str) -> bool:
    """Whether a subscript's index is the literal a KeyError printed (`"image"` for `'image'`, `7` for `7`)."""
    strip = index.strip()
    return strip == key or strip.strip("\"'") == key.strip("\"'") and strip[:1] in "\"'" and key[:1] in "\"'"
