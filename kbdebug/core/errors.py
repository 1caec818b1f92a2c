"""The error kbdebug raises itself: a bad argument found before the kernel that would assert."""

from __future__ import annotations

from typing import Any


class KbdebugError(RuntimeError):
    """Raised by `kbdebug.guard()` at the user's line; `diagnose()` reads its rule and facts."""

    def __init__(self, message: str, *, rule: str, facts: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kbdebug_rule = rule
        self.kbdebug_facts = dict(facts or {})

    @property
    def rule(self) -> str:
        return self.kbdebug_rule

    @property
    def facts(self) -> dict[str, Any]:
        return self.kbdebug_facts
