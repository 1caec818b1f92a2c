"""The result of a diagnosis: incidents ordered root cause first, as in rule-ids.md's JSON.

Plain data, made by the diagnose stage and presented by the renderers above it: no words are made here
(kbdebug.render says them), and the conveniences `diag.render()` / `diag.verify()` belong to the public
result (`kbdebug.api.Diagnosis`), which sits above the renderer and the verifier.
"""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, PrivateAttr

from kbdebug.core.facts import Facts
from kbdebug.records import Record

if TYPE_CHECKING:
    RecordList = list[Record]
    FactsField = Facts
else:
    RecordList = list[Any]
    # mypy checks each fact's name and type (kbdebug.core.facts.Facts); pydantic keeps the dict as produced, so a
    # report dumps exactly what was said (tests/test_facts_typed.py validates it against the declaration)
    FactsField = dict[str, Any]


class Consequence(BaseModel):
    rule: str
    title: str
    first_line: int
    ranks: list[int] = []  # the ranks it was read on (other ranks' timeouts waiting on the failed one)
    facts: FactsField = {}  # its own facts: they never become the root's when read on other ranks


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
    facts: FactsField = {}
    # Each record dumps as its own kind. Pydantic sees `Any` (records are appended, never validated
    # here, and a value in an `Any` field dumps by its own class), so that an incident builds the
    # schema of no record kind, nor SerializeAsAny's wrapper (a tenth of importing kbdebug).
    records: RecordList = []
    checks: list[str] = []
    commands: list[str] = []
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

    @property
    def inputs(self) -> dict[str, Any]:
        """The failing line's tensors and settings `diagnose(exc)` kept for `verify()`."""
        return dict(self._inputs or {})


@dataclass
class LiveSite:
    """What one exception of a live chain says beyond its printed text, read once from its objects: the live
    facts (the error as raised, the user's innermost frame, its line, its tensors and modules) and the failing
    line's inputs for `verify()`. Plain data: the stages below read it, never the exception."""

    facts: Facts = field(default_factory=lambda: Facts())
    inputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class LiveEvidence:
    """What a live exception chain says, by the id of the exception record that stands for each exception
    (`sites`), and the outermost exception's (`outer`) for an incident whose evidence is only log text."""

    sites: dict[int, LiveSite] = field(default_factory=dict)
    outer: LiveSite = field(default_factory=LiveSite)

    def site_of(self, records: list[Record]) -> LiveSite:
        """What the last live exception record among `records` stands for, else the outermost exception."""
        for rec in reversed(records):
            site = self.sites.get(id(rec))
            if site is not None:
                return site
        return self.outer
