"""kbdebug: from a crashed PyTorch/CUDA program's output to a verified diagnosis and a fix guide.

Imports are lazy so that `kbdebug explain` starts fast and never imports torch.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "diagnose_text": "kbdebug.api",
    "explain": "kbdebug.api",
    "Diagnosis": "kbdebug.diagnosis",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kbdebug' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["__version__", *_LAZY]
