"""kbdebug: from a crashed PyTorch/CUDA program's output to a verified diagnosis and a fix guide.

Imports are lazy so that `kbdebug explain` starts fast and never imports torch.
"""

from __future__ import annotations

from typing import Any

from kbdebug._version import __version__

_LAZY = {
    "diagnose": "kbdebug.api",
    "diagnose_text": "kbdebug.api",
    "explain": "kbdebug.api",
    "Diagnosis": "kbdebug.api",
    "capture": "kbdebug.runtime.fdtee",
    "install": "kbdebug.runtime.hooks",
    "uninstall": "kbdebug.runtime.hooks",
    "guard": "kbdebug.verify",
    "KbdebugError": "kbdebug.core.errors",
    "audit": "kbdebug.verify",
    "describe": "kbdebug.verify",
    "print_describe": "kbdebug.verify",
}


def __getattr__(name: str) -> Any:
    if name == "verify":
        import importlib

        return importlib.import_module("kbdebug.verify")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kbdebug' has no attribute {name!r}")
    import importlib

    from kbdebug._gc import paused

    with paused():  # the first use imports the pipeline: long-lived objects only (see kbdebug._gc)
        return getattr(importlib.import_module(module), name)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext kbdebug`: diagnose every exception a cell raises, below its traceback."""
    from kbdebug.runtime.hooks import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from kbdebug.runtime.hooks import unload_ipython_extension as unload

    unload(ipython)


__all__ = ["__version__", *_LAZY, "verify"]
