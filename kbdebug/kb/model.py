"""The pydantic model of a rule file: what it matches, what it reports, how it guides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kbdebug.core.facts import declared_by
from kbdebug.core.phrases import canonical_text, may_hold
from kbdebug.kb.layout import read_examples
from kbdebug.kb.patterns import check_pattern
from kbdebug.kb.shipped import required_texts
from kbdebug.records import record_field_names, record_kinds

# A cached knowledge base is only unpickled, never validated, so a rule model's schema is built only
# where a rule is validated (an uncached load, `rules lint`) or dumped (`rules show`).
_CONFIG = ConfigDict(extra="forbid", defer_build=True)
# The validation context of a bundled rule (kbdebug.kb.loader): its patterns are compiled and timed by the tests
# (tests/test_patterns.py) before a release, so loading it does not compile some 500 patterns again: a match
# compiles the few it runs. A user's rule is checked here, whatever its source.
BUNDLED = "bundled"


def _private(model: BaseModel, name: str) -> Any:
    """A private attribute's value (None where it was never set), read without pydantic's `__getattr__`: that
    fallback costs 3 us a read, and a first diagnosis reads the matches' and indicators' readings a thousand times."""
    private = model.__pydantic_private__
    return private.get(name) if private else None


def _checked(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and bool(info.context.get(BUNDLED))


# What rerunning the job does (rule-ids.md): "no" a bug in code or data fails the same way again; "smaller"
# out of a resource, rerun with less (memory, batch, workers, shm) or on a larger machine; "yes" the
# infrastructure failed, rerun as is (preferably elsewhere); "after-install" the environment is broken.
Retry = Literal["no", "smaller", "yes", "after-install"]
RETRY_VALUES: tuple[str, ...] = ("no", "smaller", "yes", "after-install")


class Match(BaseModel):
    """One way a rule recognises a record: its kind and regexes over its fields.

    `fields` maps a record field (dotted for nested values, e.g. `values.op`) to a regex that
    must be found in it; `absent` lists regexes that must not be found. Matching is by meaning
    (kernel file + condition, message template), never by a source line number.
    """

    model_config = _CONFIG

    kind: str  # a record kind (kbdebug.records.record_kinds: the one list of them)
    fields: dict[str, str] = {}
    absent: dict[str, str] = {}
    confidence: float = Field(0.8, ge=0.0, le=1.0)
    # Evidence more specific than the rule's usual kind may outrank other rules' templates on the same
    # error (a one-hot built with `scatter_(1, label, 1)` over the generic scatter bound check).
    priority: int | None = Field(None, ge=0, le=100)
    # What rerunning does when this match is the evidence, where it differs from the rule's own `retry`
    # (a GPU "busy or unavailable" is the node's state; an "invalid device ordinal" is the job's config).
    retry: Retry | None = None
    # The cause's title when this match is the evidence, where the rule's own is too broad (CUDA that cannot
    # start because the installed PyTorch is a CPU-only build, under the rule for a missing driver).
    title: str | None = Field(None, min_length=3)
    # Evidence that names the cause only when nothing else in the log does: a bare exit status (`Killed`,
    # torchrun's `exitcode: -6`) is how a job ended, and any other cause found explains it. An incident
    # whose every record is such evidence folds under any other named cause.
    weak: bool = False
    # Evidence that settles what the error is, though it names no specific cause: Python's own wording of a plain
    # error (`list index out of range`, `'NoneType' object is not subscriptable`), owned by the catch-all. No other
    # rule's phrases are inferred over it: `index out of range` is not a cut-off `index out of range in self`.
    settles: bool = False
    # Evidence a warning alone gives: the run goes on and its results are wrong (a loss that broadcasts its target).
    # Without it, a cause read only off the warnings of a log that shows no failure is none: the run went on, and
    # nothing says it went wrong (`warn_only=True`'s notice of a nondeterministic op, an optional extension that
    # did not load, MONAI ignoring `to_onehot_y` for one channel).
    warns: bool = False
    # Set on the match made up for a cause inferred from indicator phrases: the phrases found.
    # (Defaults here are values, not factories: pydantic inspects a factory's signature on every instance.)
    _inferred_from: tuple[str, ...] = PrivateAttr(default=())
    # For each pattern, the texts one of which every match holds: a field holding none of them is not searched.
    # Read off a pattern the first time a record of the match's kind meets it (a log meets a fifth of the
    # patterns: reading them all was a third of loading the rules with no cache), and all of them before
    # the rules are kept in the cache (`settle`), so a cached run never reads them.
    _needs: dict[str, frozenset[str] | None] | None = PrivateAttr(default=None)

    @property
    def inferred_from(self) -> list[str]:
        return list(self._inferred_from)

    def may_find(self, pattern: str, text: str) -> bool:
        """False only where `pattern` cannot match `text`: it lacks every text a match must hold."""
        try:
            texts = _private(self, "_needs")[pattern]
        except (KeyError, TypeError):
            texts = self._read_needs(pattern)
        return may_hold(texts, text)

    def _read_needs(self, pattern: str) -> frozenset[str] | None:
        if self._needs is None:
            self._needs = {}
        texts = self._needs[pattern] = required_texts(pattern)
        return texts

    @property
    def needs(self) -> dict[str, frozenset[str] | None]:
        """Each of its patterns' texts (None: a match may hold no fixed text), read now where not yet read."""
        needs = _private(self, "_needs")
        for pattern in (*self.fields.values(), *self.absent.values()):
            if needs is None or pattern not in needs:
                self._read_needs(pattern)
                needs = _private(self, "_needs")
        return needs or {}

    def settle(self) -> None:
        """Read every pattern's texts now (before the rules are kept in the cache)."""
        self.needs  # noqa: B018  # read for its effect

    @field_validator("kind")
    @classmethod
    def _a_record_kind(cls, value: str) -> str:
        kinds = record_kinds()
        if value not in kinds:
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": ", ".join(repr(k) for k in kinds)})
        return value

    @model_validator(mode="after")
    def _fields_of_the_kind(self) -> Match:
        """A field the record kind has not never matches: a typo would silently never fire."""
        have = record_field_names(self.kind)
        message_values = declared_by("message")
        for name in (*self.fields, *self.absent):
            head, _, rest = name.partition(".")
            if head not in have or (head == "values" and rest and rest not in message_values):
                raise ValueError(f"{name!r} is not a field of a {self.kind!r} record (its fields: {', '.join(sorted(have))})")
        return self

    @field_validator("fields", "absent")
    @classmethod
    def _regexes_compile(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if _checked(info):
            return value
        for key, pattern in value.items():
            try:
                check_pattern(pattern)
            except ValueError as exc:
                raise ValueError(f"the pattern for {key!r} {exc}") from None
        return value


class Guide(BaseModel):
    """Ruff-style documentation; every section is a jinja2 template over `facts`."""

    model_config = _CONFIG

    what: str = Field(min_length=10)
    why: str = Field(min_length=10)
    confirm: str = Field(min_length=10)
    fix: str = Field(min_length=10)
    # the sections of the guide's case pages, by `name.section`: what `case(...)` in a section renders (kbdebug.kb.layout)
    cases: dict[str, str] = {}


class Indicator(BaseModel):
    """A phrase that speaks for the rule when no template fits (a truncated, re-worded or translated
    message), the way Build Failure Analyzer's indications do. Found in an error's folded message;
    the weights of the phrases found combine as independent evidence (1 - prod(1 - w))."""

    model_config = _CONFIG

    pattern: str
    weight: float = Field(0.6, gt=0.0, le=1.0)
    # Read off the pattern the first time a message is searched for it, and before the rules are kept in the
    # cache (`settle`): the fixed text it starts with, for a message cut off in the middle of it, and the
    # texts one of which every match holds, so that a message holding none of them is not searched. Most
    # logs name their cause by a template and never search an indicator.
    _read: tuple[str, frozenset[str] | None] | None = PrivateAttr(default=None)

    def _readings(self) -> tuple[str, frozenset[str] | None]:
        read: tuple[str, frozenset[str] | None] | None = _private(self, "_read")
        if read is None:
            read = self._read = (canonical_text(self.pattern.removeprefix("(?i)")), required_texts(self.pattern))
        return read

    @property
    def lead(self) -> str:
        return self._readings()[0]

    @property
    def required(self) -> frozenset[str] | None:
        """Texts one of which every match holds; None: a match may hold no fixed text."""
        return self._readings()[1]

    def may_match(self, text: str) -> bool:
        return may_hold(self.required, text)

    def may_match_folded(self, lowered: str) -> bool:
        """The same for a lower-cased text (a retyped or OCR'd message: `expected scaLar type Long`)."""
        required = self.required
        return required is None or any(t.lower() in lowered for t in required)

    def settle(self) -> None:
        """Read the pattern now (before the rules are kept in the cache)."""
        self._readings()

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str, info: ValidationInfo) -> str:
        if _checked(info):
            return value
        try:
            return check_pattern(value)
        except ValueError as exc:
            raise ValueError(f"the pattern {exc}") from None


class Examples(BaseModel):
    """Log snippets that must (positive) and must not (negative) be diagnosed as this rule, run by
    the tests and by `kbdebug rules lint`: the rule's contract, like ruff's rule docs."""

    model_config = _CONFIG

    positive: list[str] = []
    negative: list[str] = []


class Rule(BaseModel):
    model_config = _CONFIG

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = Field(min_length=3)
    priority: int = Field(50, ge=0, le=100)
    retry: Retry = "no"
    match: list[Match] = []
    indicators: list[Indicator] = []
    # Groups this cause belongs to; `consequence_of = ["@group"]` names them all at once.
    groups: list[str] = []
    # What the rule is, for code that must act on it without naming it: "async" (reported later than
    # it happened), "fallback" (the catch-all), "collective" (a rank waiting on another rank's failure), "surfaces"
    # (where another process's failure showed: a plain error that process printed is its cause).
    tags: list[str] = []
    consequence_of: list[str] = []
    # Ops whose argument check in `kbdebug.guard()` stands for this cause (the op names guard reports).
    guard_ops: list[str] = []
    checks: list[str] = []
    commands: list[str] = []
    facts: dict[str, str] = {}
    # What makes two of this rule's crashes the same (kbdebug.diagnoser.signature): the facts its signature's
    # site is built from, in order (`["kernel_file", "assertion"]`); empty: the site kbdebug reads for any rule.
    signature: list[str] = []
    guide: Guide
    references: list[str] = []
    # a single-file rule's [examples]; a rule folder's are files in its examples/, read when asked for
    examples_table: Examples = Field(default_factory=Examples, alias="examples")
    _examples_dir: str | None = PrivateAttr(default=None)

    @property
    def examples(self) -> Examples:
        """The rule's examples. A folder's are read only by the tests and `rules lint`/`show`: a diagnosis never
        needs them, and reading some 400 files cost every cold start (and every cached knowledge base) their text."""
        if self._examples_dir is None:
            return self.examples_table
        return Examples.model_validate(read_examples(Path(self._examples_dir)))

    def settle(self) -> None:
        """Read now what its matches and indicators otherwise read off their patterns when first used: a rule
        about to be kept in the cache is read once, not again in every run that loads it."""
        for m in self.match:
            m.settle()
        for ind in self.indicators:
            ind.settle()

    def read_examples_from(self, folder: Path) -> None:
        """Take the examples from the files in a rule folder's examples/ (kbdebug.kb.layout)."""
        self._examples_dir = str(folder)

    @model_validator(mode="after")
    def _recognisable(self) -> Rule:
        if not self.match and not self.indicators:
            raise ValueError("a rule needs at least one [[match]] or [[indicators]] entry")
        return self
