"""The verifier: checks on the user's own tensors that confirm or refute a diagnosis (needs torch).

`Diagnosis.verify(target=..., logits=...)` runs the checks its rules name; each check is also a
plain function (`check_class_targets(target, num_classes=14)`) usable in a data-pipeline test.
"""

from __future__ import annotations

from typing import Any

from kbdebug.diagnosis import Diagnosis
from kbdebug.verify.result import CheckResult as CheckResult  # plain data: importable without torch

try:
    import torch  # noqa: F401
except ImportError:  # the base install has no torch: the checks say how to get it when asked for
    _HAS_TORCH = False
else:
    _HAS_TORCH = True
    from kbdebug.verify.catalog import *  # noqa: F403
    from kbdebug.verify.catalog import ALIASES, RUNNERS, run_checks  # noqa: F401


def verify_diagnosis(diag: Diagnosis, tensors: dict[str, Any]) -> Diagnosis:
    """Run the checks each incident's rule names on the user's own tensors, those `tensors` names and, for the
    roles not passed, those `diagnose(exc)` captured on the failing line.

    A failing check is evidence for the diagnosis (confidence goes up); checks that all ran and passed are
    evidence against it (confidence goes down, and a note says so)."""
    if not _HAS_TORCH:
        raise ImportError("kbdebug's verifier (checks, guard, audit, describe) needs torch: pip install 'kbdebug[torch]'")
    given = {**diag.inputs, **tensors}
    for inc in diag.incidents:
        results = run_checks(inc.checks, inc.facts, given)
        inc.verification = [r.model_dump(mode="json") for r in results]
        ran = [r for r in results if r.passed is not None]
        if any(r.passed is False for r in ran):
            inc.confidence = max(inc.confidence, 0.99)
        elif ran and len(ran) == len(results) and inc.device_evidence:
            # a kernel assertion (or guard()) proved the cause: a clean batch shows only where it is not
            diag.notes.append(f"{inc.rule}: every check passed on the given tensors: the bad values are in another batch")
        elif ran and len(ran) == len(results):
            inc.confidence = round(inc.confidence * 0.5, 2)
            diag.notes.append(f"{inc.rule}: every check passed on the given tensors; the cause may be in other inputs")
    return diag


def __getattr__(name: str) -> Any:
    if _HAS_TORCH or name.startswith("__"):
        raise AttributeError(f"module 'kbdebug.verify' has no attribute {name!r}")
    raise ImportError(f"kbdebug's verifier (checks, guard, audit, describe) needs torch: pip install 'kbdebug[torch]' ({name})")
