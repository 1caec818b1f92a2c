"""How kbdebug writes the values it reads off tensors: one vocabulary for the verifier, guard() and the
live facts, so the same value reads the same in every finding. A leaf module (torch-free)."""

from __future__ import annotations

from typing import Any


def plain_number(x: Any) -> Any:
    """A number as a person reads it: integral values as ints, others to 6 significant digits; a 0-d
    tensor (anything with `.item()`) is read first; other values pass through."""
    if hasattr(x, "item") and callable(x.item):
        x = x.item()
    if isinstance(x, bool):
        return x
    if isinstance(x, float):
        if x.is_integer() and abs(x) < 2**53:
            return int(x)
        return float(f"{x:.6g}")
    return x


def dtype_name(dtype: Any) -> str:
    """`torch.float32` -> `float32`."""
    return str(dtype).removeprefix("torch.")
