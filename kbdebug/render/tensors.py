"""`frame_tensors` (the tensors named on the failing line) as table rows, the offending one marked."""

from __future__ import annotations

from typing import Any

COLUMNS = ("name", "shape", "dtype", "device", "min", "max")


def _offending(name: str, info: dict[str, Any], facts: dict[str, Any]) -> bool:
    """The tensor the error is about: the label whose shape the message names, or one holding negative indices."""
    shape = info.get("shape")
    target = facts.get("target_shape")
    if target is not None:
        return shape == target
    shapes = facts.get("shapes") or []
    if len(shapes) == 2 and shapes[0] != shapes[1]:
        return shape == shapes[1]
    lo = info.get("min")
    return str(info.get("dtype", "")).startswith(("int", "long", "uint")) and isinstance(lo, int) and lo < 0


def tensor_rows(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per captured tensor: the COLUMNS as strings, and `offending` for the one to look at."""
    tensors = facts.get("frame_tensors")
    if not isinstance(tensors, dict):
        return []
    rows = []
    for name, info in tensors.items():
        if not isinstance(info, dict):
            continue
        shape = info.get("shape")
        row: dict[str, Any] = {
            "name": str(name),
            "shape": "[" + ", ".join(str(d) for d in shape) + "]" if isinstance(shape, list) else "",
            "dtype": str(info.get("dtype", "")),
            "device": str(info.get("device", "")),
            "min": "" if info.get("min") is None else str(info["min"]),
            "max": "" if info.get("max") is None else str(info["max"]),
        }
        row["offending"] = _offending(str(name), info, facts)
        rows.append(row)
    return rows
