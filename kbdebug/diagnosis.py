"""The result of a diagnosis: incidents ordered root cause first, as in rule-ids.md's JSON."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kbdebug.records import AnyRecord


class Consequence(BaseModel):
    rule: str
    title: str
    first_line: int
    summary: str


class Incident(BaseModel):
    rule: str
    title: str
    confidence: float
    facts: dict[str, Any] = Field(default_factory=dict)
    records: list[AnyRecord] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    fix: str = ""
    guide: dict[str, str] = Field(default_factory=dict)
    consequences: list[Consequence] = Field(default_factory=list)
    first_line: int = 0
    device_evidence: bool = False
    verification: list[dict[str, Any]] = Field(default_factory=list)


class Diagnosis(BaseModel):
    source: str = "-"
    incidents: list[Incident] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def root(self) -> Incident | None:
        return self.incidents[0] if self.incidents else None

    def render(self, fmt: str = "text", color: bool = False) -> str:
        from kbdebug.render import render

        return render([self], fmt, color=color)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"incidents": {"__all__": {"first_line", "device_evidence"}}})

    def verify(self, **tensors: Any) -> Diagnosis:
        """Run the checks each incident's rule names on the user's own tensors (needs torch)."""
        from kbdebug.verify import run_checks

        for inc in self.incidents:
            results = run_checks(inc.checks, inc.facts, tensors)
            inc.verification = [r.model_dump(mode="json") for r in results]
        return self
