"""The live values behind a plain Python error, read from the failing frame: the list an index ran past and its
length, the dict a key was missing from and a few of its keys, the call whose None a line used, the names close
to an undefined one. The catch-all's guide quotes them (knowledge/other/guide.md), the way friendly-traceback does.

Only names, attributes and literal subscripts are evaluated (never a call: reading a value must not run the
user's code again), and nothing here raises: a value that cannot be read is left out.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import inspect
import re
from collections.abc import Mapping
from types import FrameType
from typing import Any

from kbdebug.diagnoser.plain import inner_error, plain_facts

MAX_KEYS = 8  # of a dict's keys quoted
_MISSING = object()


def live_facts(error_type: str, message: str, frame: FrameType, line: int, code: str) -> dict[str, Any]:
    """The plain error's facts (kbdebug.diagnoser.plain) and the values of what they name in `frame`."""
    try:
        inner = inner_error(message)
        if inner:  # re-raised from a worker process: its values are not in this process
            return inner | plain_facts(inner["inner_error_type"], inner["inner_error_message"], inner.get("inner_code", ""))
        first = message.strip().splitlines()[0] if message.strip() else ""
        facts = plain_facts(error_type, first, code)
        return facts | _values(error_type.rsplit(".", 1)[-1], facts, frame, line, code)
    except Exception:
        return {}


def _values(kind: str, facts: dict[str, Any], frame: FrameType, line: int, code: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "KeyError" and not facts.get("looked_up_in"):  # `label2id[label]`: the index is a name, not the literal
        base = _mapping_missing(frame, code, str(facts.get("missing_key", "")))
        if base:
            out["looked_up_in"] = facts["looked_up_in"] = base
    if kind == "KeyError" and facts.get("looked_up_in"):
        mapping = _value(frame, str(facts["looked_up_in"]))
        if isinstance(mapping, Mapping):
            out["available_keys"] = [_safe_repr(k) for k in list(mapping.keys())[:MAX_KEYS]]
            out["key_count"] = len(mapping)
    elif kind == "IndexError":
        out.update(_short_sequence(frame, code))
    elif kind == "ValueError":
        out.update(_unpacked_or_searched(frame, code))
    elif facts.get("attribute_of_type") == "NoneType" and facts.get("attribute_of"):
        source = _none_source(frame, line, str(facts["attribute_of"]))
        if source:
            out["none_from"] = source
    elif facts.get("undefined_name"):
        names = [*frame.f_locals, *frame.f_globals, *dir(builtins)]
        close = difflib.get_close_matches(str(facts["undefined_name"]), names, n=3)
        if close:
            out["similar_names"] = close
    return out


def _unpacked_or_searched(frame: FrameType, code: str) -> dict[str, Any]:
    """For `a, b = batch` / `for a, b in loader` (too many or not enough values to unpack): the unpacked value and its
    length; for `classes.index(x)` (x is not in list): the list and its first items."""
    tree = _parse(code)
    for node in ast.walk(tree) if tree is not None else ():
        value: ast.AST | None = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Tuple) for t in node.targets):
            value = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "index":
            value = node.func.value
        found = _eval(frame, value) if value is not None else _MISSING
        if isinstance(found, (list, tuple)) and value is not None:
            return {
                "sequence_name": ast.unparse(value),
                "sequence_length": len(found),
                "sequence_items": [_safe_repr(v)[:40] for v in found[:MAX_KEYS]],
            }
    return {}


def _mapping_missing(frame: FrameType, code: str, key: str) -> str | None:
    """The subscript of the failing line whose base is a mapping and whose index's value is the missing key."""
    tree = _parse(code)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Subscript):
            base, index = _eval(frame, node.value), _eval(frame, node.slice)
            if isinstance(base, Mapping) and index is not _MISSING and _safe_repr(index) == key:
                return ast.unparse(node.value)
    return None


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return ""


def _short_sequence(frame: FrameType, code: str) -> dict[str, Any]:
    """The subscript of the failing line whose index is past its sequence's end (or whose sequence is empty)."""
    tree = _parse(code)
    if tree is None:
        return {}
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript) or isinstance(node.slice, ast.Slice):
            continue
        base, index = _eval(frame, node.value), _eval(frame, node.slice)
        try:
            length = len(base) if base is not _MISSING else None  # type: ignore[arg-type]
        except Exception:
            length = None
        if length is None:
            if not found and base is _MISSING and isinstance(node.value, ast.Call):
                found = {"sequence_name": ast.unparse(node.value), "sequence_from_call": True}
            continue
        entry: dict[str, Any] = {"sequence_name": ast.unparse(node.value), "sequence_length": length}
        if isinstance(index, int) and not isinstance(index, bool):
            entry["index_value"] = index
            if not -length <= index < length:
                return entry
        if not found or (length == 0 and "sequence_length" in found and found["sequence_length"]):
            found = entry
    return found


def _none_source(frame: FrameType, line: int, name: str) -> str | None:
    """The right-hand side of the last assignment to `name` before the failing line, in its function: the call
    that returned None (`cv2.imread(path)`). None where that is None itself (`best = None`): nothing returned it, the
    variable started so and nothing set it since."""
    try:
        lines, start = inspect.getsourcelines(frame.f_code)
    except (OSError, TypeError):
        return None
    assign = re.compile(rf"^\s*(?:[\w\s,]*,\s*)?{re.escape(name)}\s*(?:,[\w\s,]*)?=(?!=)\s*(.+?)\s*$")
    found = None
    for no, text in enumerate(lines, start):
        m = assign.match(text) if no < line else None
        if m:
            found = m.group(1)
    return None if found == "None" else found


def _parse(code: str) -> ast.AST | None:
    try:
        return ast.parse(code.strip().rstrip(":"), mode="exec")
    except (SyntaxError, ValueError):
        try:  # a line that opens a block (`for x, y in loader:`) or continues one
            return ast.parse(code.strip() + " pass", mode="exec")
        except (SyntaxError, ValueError):
            return None


def _value(frame: FrameType, text: str) -> Any:
    tree = _parse(text)
    if isinstance(tree, ast.Module) and len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        value = _eval(frame, tree.body[0].value)
        return None if value is _MISSING else value
    return None


def _eval(frame: FrameType, node: ast.AST) -> Any:
    """A name, attribute or literal subscript's value in `frame`; _MISSING for anything else (a call is never made)."""
    try:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            number = node.operand.value
            return -number if isinstance(number, (int, float)) else _MISSING
        if isinstance(node, ast.Name):
            for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
                if node.id in scope:
                    return scope[node.id]
            return _MISSING
        if isinstance(node, ast.Attribute):
            base = _eval(frame, node.value)
            return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Constant, ast.Name, ast.UnaryOp)):
            base, index = _eval(frame, node.value), _eval(frame, node.slice)
            if base is _MISSING or index is _MISSING or not isinstance(base, (list, tuple, dict, str)):
                return _MISSING
            return base[index]
    except Exception:
        return _MISSING
    return _MISSING
