"""The base of every record kind: where its evidence is in the log, and the facts it says."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from kbdebug.stamps import Stamp

Triple = tuple[int, int, int]


class Record(BaseModel):
    # A kind's schema is built when a log first holds it (most logs hold three of twenty kinds); a
    # record unpickled from a worker process builds its kind first, or dumping it would fail.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        type(self).model_rebuild()
        super().__setstate__(state)

    first_line: int = 0
    last_line: int = 0
    raw: str = ""
    rank: int | None = None
    time: Stamp | None = None  # the time its line was stamped with (a launcher's or logger's prefix): who failed first
    if TYPE_CHECKING:  # each record type declares its own Literal `kind`, the union's discriminator
        kind: str
    # The facts this kind says (`facts()`), declared beside it: `rules lint` checks guide variables against
    # these names, and tests/test_fact_declarations.py that `facts()` says nothing undeclared.
    FACTS: ClassVar[tuple[str, ...]] = ("rank",)
    # Fields said under their own names when set (`self._fields(*FIELD_FACTS)`); declared facts too.
    FIELD_FACTS: ClassVar[tuple[str, ...]] = ()
    # A kind whose facts include the values a grammar reads (`TorchMessage.values`) names that grammar.
    FACTS_FROM_GRAMMAR: ClassVar[str | None] = None

    @classmethod
    def declared_facts(cls) -> frozenset[str]:
        """Every fact this kind may say: its own declaration and those of the kinds it extends."""
        return frozenset(name for c in cls.__mro__ for key in ("FACTS", "FIELD_FACTS") for name in c.__dict__.get(key, ()))

    def facts(self) -> dict[str, Any]:
        """The facts of rule-ids.md this record carries; each record kind says its own."""
        return {} if self.rank is None else {"rank": self.rank}

    def failed_rank_of(self) -> int | None:
        """The rank whose failure this record reports: the rank that printed it, unless it names another."""
        return self.rank

    def _fields(self, *names: str) -> dict[str, Any]:
        """The named fields that are set, under their own names."""
        return {n: v for n in names if (v := getattr(self, n)) is not None}
