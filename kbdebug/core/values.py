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


_UNITS = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def size_bytes(text: object) -> int | None:
    """`2.00 GiB` / `512.00 MiB` / `20 bytes` as printed in an OOM message -> bytes; None when not a size."""
    parts = str(text or "").replace(",", "").split()
    if len(parts) != 2:
        return None
    unit = _UNITS.get(parts[1].lower().removesuffix("ytes") if parts[1].lower().startswith("byte") else parts[1].lower())
    try:
        return int(float(parts[0]) * unit) if unit else None
    except ValueError:
        return None


def human_size(value: object) -> str:
    """A size as a person reads it, in binary units: `800000000000 bytes` -> `745 GiB`; text that is not a
    size passes through unchanged (a guide never shows less than the log said)."""
    n = value if isinstance(value, int) and not isinstance(value, bool) else size_bytes(value)
    if n is None:
        return str(value)
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 1000 else f"{n / scale:.0f} {unit}"
    return f"{n} bytes"
