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
    references: list[str] = Field(default_factory=list)


class Diagnosis(BaseModel):
    source: str = "-"
    incidents: list[Incident] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # The scanned log lines near each incident's records (line number -> text), so a report can
    # show the evidence in context; not part of the JSON contract.
    lines: dict[int, str] = Field(default_factory=dict)

    @property
    def root(self) -> Incident | None:
        return self.incidents[0] if self.incidents else None

    def render(self, fmt: str = "text", color: bool = False) -> str:
        from kbdebug.render import render

        return render([self], fmt, color=color)

    def to_json(self) -> dict[str, Any]:
        hidden = {"first_line", "device_evidence", "references"}
        return self.model_dump(mode="json", exclude={"lines": True, "incidents": {"__all__": hidden}})

    def verify(self, **tensors: Any) -> Diagnosis:
        """Run the checks each incident's rule names on the user's own tensors (needs torch).

        A failing check is evidence for the diagnosis (confidence goes up); checks that all ran
        and passed are evidence against it (confidence goes down, and a note says so).
        """
        from kbdebug.verify import run_checks

        for inc in self.incidents:
            results = run_checks(inc.checks, inc.facts, tensors)
            inc.verification = [r.model_dump(mode="json") for r in results]
            ran = [r for r in results if r.passed is not None]
            if any(r.passed is False for r in ran):
                inc.confidence = max(inc.confidence, 0.99)
            elif ran and len(ran) == len(results):
                inc.confidence = round(inc.confidence * 0.5, 2)
                self.notes.append(f"{inc.rule}: every check passed on the given tensors; the cause may be in other inputs")
        return self
