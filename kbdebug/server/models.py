"""The answers of the /v1 API as pydantic models, so that /docs and /openapi.json document each one.
The diagnosis itself is docs/json.md's contract (what `kbdebug explain --format json` prints): an object."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

DiagnosisJSON = dict[str, Any]  # docs/json.md: schema_version, source, incidents, notes


class Problem(BaseModel):
    detail: str = Field(description="What went wrong, as one sentence.")


class Example(BaseModel):
    report: str = Field(description="The report's id: opaque and unguessable (GET /v1/reports/{id}).")
    received_at: str
    job: str
    host: str
    rank: int | None
    source: str


class Occurrence(Example):
    rule: str
    title: str
    command: str
    user: str
    tags: str


class Group(BaseModel):
    signature: str = Field(description="The root incident's signature (12 hex digits).")
    signature_version: int = Field(description="How signatures are built; a change regroups stored reports at start-up.")
    key: str = Field(description="The signature's readable key: rule | site | user frame.")
    rule: str
    title: str
    retry: str | None
    count: int
    first_seen: str
    last_seen: str
    new: bool
    status: Literal["open", "resolved", "ignored", "regressed"]
    jobs: list[str]
    hosts: list[str]
    example: Example


class GroupDetail(Group):
    diagnosis: DiagnosisJSON
    occurrences: list[Occurrence]


class Crashes(BaseModel):
    crashes: list[Group]


class Rule(BaseModel):
    id: str
    title: str
    priority: int
    retry: str | None


class Rules(BaseModel):
    rules: list[Rule]


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    schema_version: int
    signature_version: int
    reports: int


class Deleted(BaseModel):
    deleted: int = Field(description="How many reports were deleted.")


class Triage(BaseModel):
    status: Literal["open", "resolved", "ignored"]


class Unrecognised(BaseModel):
    count: int
    reports: list[Occurrence]


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "description": what}
    for code, what in (
        (401, "The server has a token and the request did not carry it."),
        (403, "A write without X-Kbdebug-Client or a token header."),
        (421, "The Host header names another site."),
        (422, "A malformed parameter."),
        (503, "The database cannot be used just now (Retry-After says when to try again)."),
    )
}
