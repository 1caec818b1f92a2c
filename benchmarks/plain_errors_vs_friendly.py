"""kbdebug's page for a plain Python error against friendly-traceback's explanation of the same live error.

Usage: PYTHONPATH=. python benchmarks/plain_errors_vs_friendly.py [--verbose]

Raises each error of tests/plain_live_errors.py (plain errors of ML scripts) and scores each explanation on the
same measure: does it name the failing object, the key/index/attribute/name that failed, and its value (the
dict's keys, the list's length, the call that returned None)? One point each, where the case has one; each is
looked for in any of its wordings (`3 items`, `length 3`), whatever the case.
friendly-traceback is a measuring stick only, not a dependency: without it, only kbdebug's score is printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from plain_live_errors import CASES, names_all

from kbdebug import diagnose

_TRACEBACKS = ("simulated_python_traceback", "original_python_traceback", "shortened_traceback")


def kbdebug_text(exc: BaseException) -> str:
    inc = diagnose(exc).incidents[0]
    return " ".join(str(inc.guide.get(k, "")) for k in ("what", "why", "confirm", "fix"))


def friendly_text(exc: BaseException) -> str | None:
    try:
        from friendly_traceback.core import FriendlyTraceback
    except ImportError:
        return None
    ft = FriendlyTraceback(type(exc), exc, exc.__traceback__)
    ft.compile_info()
    return " ".join(str(v) for k, v in ft.info.items() if k not in _TRACEBACKS)


def score(text: str | None, names: tuple[Any, ...]) -> tuple[int, int]:
    wanted = [w for w in names if w is not None]
    return (sum(names_all(text, tuple(wanted))) if text is not None else 0), len(wanted)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    totals: dict[str, list[int]] = {"kbdebug": [0, 0], "friendly-traceback": [0, 0]}
    have_friendly = True
    for case in CASES:
        exc: Any = None
        try:
            case.fn()
        except Exception as raised:
            exc = raised
        texts = {"kbdebug": kbdebug_text(exc), "friendly-traceback": friendly_text(exc)}
        have_friendly = texts["friendly-traceback"] is not None
        row = []
        for tool, text in texts.items():
            got, out_of = score(text, case.names)
            totals[tool][0] += got
            totals[tool][1] += out_of
            row.append(f"{tool} {got}/{out_of}")
        if args.verbose:
            print(f"{case.name:28} " + "  ".join(row))
    print(f"{len(CASES)} live plain errors; points: object, key/index/attribute/name, value")
    for tool, (got, out_of) in totals.items():
        if tool == "kbdebug" or have_friendly:
            print(f"{tool:20} {got}/{out_of}")
    if not have_friendly:
        print("friendly-traceback is not installed: pip install friendly-traceback to compare")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
