"""The result of one verifier check: evidence for or against a diagnosis, in numbers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class CheckResult(BaseModel):
    """`passed` is True when the check found nothing wrong, False when it found the problem, and
    None when it could not run (a tensor it needs was not given, no GPU for a GPU-only check)."""

    name: str
    passed: bool | None
    finding: str
    values: dict[str, Any] = Field(default_factory=dict)
    offending: list[Any] = Field(default_factory=list)
    positions: list[list[int]] = Field(default_factory=list)
    fix: str = ""

    def __str__(self) -> str:
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}[self.passed]
        text = f"{mark} {self.name}: {self.finding}"
        return f"{text}\n     fix: {self.fix}" if self.fix and self.passed is False else text

    def __bool__(self) -> bool:  # `assert check_index(...)` reads naturally
        return self.passed is not False
