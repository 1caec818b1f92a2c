"""Conveniences a lower layer offers by calling into a higher one, registered by the package's root.

`diag.render()` and `diag.verify()` live on the result object (kbdebug.diagnosis), while the renderer and
the verifier sit above it. kbdebug/__init__.py, run on any `import kbdebug...`, registers here functions
that import them when first called (the verifier needs torch), so no layer imports one above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PROVIDED: dict[str, Callable[..., Any]] = {}


def provide(name: str, function: Callable[..., Any]) -> None:
    """Register what a convenience (`render`, `run_checks`) calls."""
    _PROVIDED[name] = function


def provided(name: str) -> Callable[..., Any]:
    """The registered function, or a RuntimeError that says what is missing."""
    try:
        return _PROVIDED[name]
    except KeyError:
        raise RuntimeError(f"kbdebug's {name} is not registered: import kbdebug") from None
