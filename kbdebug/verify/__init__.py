"""The verifier: checks on the user's own tensors that confirm or refute a diagnosis (needs torch).

`Diagnosis.verify(target=..., logits=...)` runs the checks its rules name; each check is also a
plain function (`check_class_targets(target, num_classes=14)`) usable in a data-pipeline test.
"""

from __future__ import annotations

from typing import Any

from kbdebug.verify.result import CheckResult as CheckResult  # plain data: importable without torch

try:
    import torch  # noqa: F401
except ImportError:  # the base install has no torch: the checks say how to get it when asked for
    _HAS_TORCH = False
else:
    _HAS_TORCH = True
    from kbdebug.verify.catalog import *  # noqa: F403
    from kbdebug.verify.catalog import ALIASES, RUNNERS, run_checks  # noqa: F401


def __getattr__(name: str) -> Any:
    if _HAS_TORCH or name.startswith("__"):
        raise AttributeError(f"module 'kbdebug.verify' has no attribute {name!r}")
    raise ImportError(f"kbdebug's verifier (checks, guard, audit, describe) needs torch: pip install 'kbdebug[torch]' ({name})")
