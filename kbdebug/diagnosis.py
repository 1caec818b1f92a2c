"""The result of a diagnosis: incidents ordered root cause first, as in rule-ids.md's JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, PrivateAttr

from kbdebug.providers import provided
from kbdebug.records import Record

if TYPE_CHECKING:
    RecordList = list[Record]
else:
    RecordList = list[Any]


class Consequence(BaseModel):
    rule: str
    title: str
    first_line: int
    summary: str
    ranks: list[int] = []  # the ranks it was read on (other ranks' timeouts waiting on the failed one)
    facts: dict[str, Any] = {}  # its own facts: they never become the root's when read on other ranks


class FirstFailure(BaseModel):
    """Which rank failed first and when, read off the time stamps of the failure's own lines (and of the
    other ranks' failures folded into it): the earliest stamped one, whatever rank printed it."""

    rank: int | None = None
    time: str  # as the log printed it
    at: str  # ISO 8601 (`--MM-DDT...` when the log printed no year), for sorting
    line: int  # the line it was read on
    source: str | None = None  # the input it was read in, when several inputs were diagnosed together

    def describe(self) -> str:
        """`rank 3 at 2024-05-01 12:03:11` (the input's name stands in when no rank was printed)."""
        who = f"rank {self.rank}" if self.rank is not None else (self.source or f"line {self.line}")
        where = f" ({self.source})" if self.source and self.rank is not None else ""
        return f"{who} at {self.time}{where}"


class Incident(BaseModel):
    rule: str
    title: str
    confidence: float
    # The crash's identity across runs, ranks and pastes (kbdebug/signature.py says how it is built).
    signature: str = ""
    signature_key: str = ""
    facts: dict[str, Any] = {}
    # Each record dumps as its own kind. Pydantic sees `Any` (records are appended, never validated
    # here, and a value in an `Any` field dumps by its own class), so that an incident builds the
    # schema of no record kind, nor SerializeAsAny's wrapper (a tenth of importing kbdebug).
    records: RecordList = []
    checks: list[str] = []
    commands: list[str] = []
    fix: str = ""
    # What rerunning does (rule-ids.md: no, smaller, yes, after-install), set on a root incident's guide
    retry: str | None = None
    guide: dict[str, str] = {}
    consequences: list[Consequence] = []
    first_failure: FirstFailure | None = None  # when the log is time-stamped
    first_line: int = 0
    device_evidence: bool = False
    verification: list[dict[str, Any]] = []
    references: list[str] = []


class Diagnosis(BaseModel):
    source: str = "-"
    incidents: list[Incident] = []
    notes: list[str] = []
    # The scanned log lines near each incident's records (line number -> text), so a report can
    # show the evidence in context; not part of the JSON contract.
    lines: dict[int, str] = {}
    # What diagnose(exc) found on the failing line (tensors, literal settings): not part of the JSON.
    _inputs: dict[str, Any] | None = PrivateAttr(default=None)  # a factory's signature is inspected per instance

    def keep_inputs(self, inputs: dict[str, Any]) -> None:
        """Remember the failing line's tensors and settings for a later `verify()` with no arguments."""
        if self._inputs is None:
            self._inputs = {}
        for key, val in inputs.items():
            self._inputs.setdefault(key, val)

    @property
    def root(self) -> Incident | None:
        return self.incidents[0] if self.incidents else None

    def render(self, fmt: str = "text", color: bool = False, *, facts: bool = False, evidence: bool = True) -> str:
        """The diagnosis as "text", "markdown", "json" or "html" (kbdebug.render). In text, `facts=True` adds the
        table of every fact read; `evidence=False` leaves out the log lines (shown just above, by an excepthook)."""
        return str(provided("render")([self], fmt, color=color, facts=facts, evidence=evidence))

    def to_json(self) -> dict[str, Any]:
        hidden = {"first_line", "device_evidence", "references"}
        return self.model_dump(mode="json", exclude={"lines": True, "incidents": {"__all__": hidden}})

    def verify(self, **tensors: Any) -> Diagnosis:
        """Run the checks each incident's rule names on the user's own tensors (needs torch).

        Tensors and settings captured from the failing line by `diagnose(exc)` are used for the
        roles not passed here, so `diag.verify()` alone checks what the failing call was given.
        A failing check is evidence for the diagnosis (confidence goes up); checks that all ran
        and passed are evidence against it (confidence goes down, and a note says so).
        """
        run_checks = provided("run_checks")
        given = {**(self._inputs or {}), **tensors}
        for inc in self.incidents:
            results = run_checks(inc.checks, inc.facts, given)
            inc.verification = [r.model_dump(mode="json") for r in results]
            ran = [r for r in results if r.passed is not None]
            if any(r.passed is False for r in ran):
                inc.confidence = max(inc.confidence, 0.99)
            elif ran and len(ran) == len(results) and inc.device_evidence:
                # a kernel assertion (or guard()) proved the cause: a clean batch shows only where it is not
                self.notes.append(f"{inc.rule}: every check passed on the given tensors: the bad values are in another batch")
            elif ran and len(ran) == len(results):
                inc.confidence = round(inc.confidence * 0.5, 2)
                self.notes.append(f"{inc.rule}: every check passed on the given tensors; the cause may be in other inputs")
        return self
