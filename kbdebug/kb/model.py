"""The pydantic model of a rule file: what it matches, what it reports, how it guides."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RecordKind = Literal[
    "kernel_assert", "exception", "cuda_error", "cpp_exception", "sanitizer", "sanitizer_summary",
    "oom", "library_error", "nccl", "elastic_failure", "message", "arch_warning",
]


class Match(BaseModel):
    """One way a rule recognises a record: its kind and regexes over its fields.

    `fields` maps a record field (dotted for nested values, e.g. `values.op`) to a regex that
    must be found in it; `absent` lists regexes that must not be found. Matching is by meaning
    (kernel file + condition, message template), never by a source line number.
    """

    model_config = ConfigDict(extra="forbid")

    kind: RecordKind
    fields: dict[str, str] = Field(default_factory=dict)
    absent: dict[str, str] = Field(default_factory=dict)
    confidence: float = Field(0.8, ge=0.0, le=1.0)

    @field_validator("fields", "absent")
    @classmethod
    def _regexes_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for key, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"regex for {key!r} does not compile: {exc}") from exc
        return value


class Guide(BaseModel):
    """Ruff-style documentation; every section is a jinja2 template over `facts`."""

    model_config = ConfigDict(extra="forbid")

    what: str = Field(min_length=10)
    why: str = Field(min_length=10)
    confirm: str = Field(min_length=10)
    fix: str = Field(min_length=10)


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = Field(min_length=3)
    priority: int = Field(50, ge=0, le=100)
    match: list[Match] = Field(min_length=1)
    consequence_of: list[str] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    facts: dict[str, str] = Field(default_factory=dict)
    guide: Guide
    references: list[str] = Field(default_factory=list)
