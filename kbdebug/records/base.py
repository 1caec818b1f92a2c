"""The base of every record kind: where its evidence is in the log, and the facts it says."""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from kbdebug.core.facts import Facts, declared_by
from kbdebug.core.stamps import Stamp

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
    # Fields said under their own names when set (`self._fields(*FIELD_FACTS)`), each a declared fact.
    FIELD_FACTS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def declared_facts(cls) -> frozenset[str]:
        """Every fact this kind may say: the facts kbdebug.core.facts declares it (or every record) produces.
        `rules lint` checks guide variables against these names, tests/test_facts_typed.py that `facts()`
        says nothing else and nothing of another type."""
        kind = cls.model_fields["kind"].default if "kind" in cls.model_fields else "records"
        return declared_by(kind)

    def facts(self) -> Facts:
        """The facts of rule-ids.md this record carries; each record kind says its own."""
        return {} if self.rank is None else {"rank": self.rank}

    def failed_rank_of(self) -> int | None:
        """The rank whose failure this record reports: the rank that printed it, unless it names another."""
        return self.rank

    def _fields(self, *names: str) -> Facts:
        """The named fields that are set, under their own names."""
        return {n: v for n in names if (v := getattr(self, n)) is not None}  # type: ignore[return-value]  # FIELD_FACTS are declared
