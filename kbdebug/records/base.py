"""The base of every record kind: where its evidence is in the log, and the facts it says."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

    def facts(self) -> dict[str, Any]:
        """The facts of rule-ids.md this record carries; each record kind says its own."""
        return {} if self.rank is None else {"rank": self.rank}

    def failed_rank_of(self) -> int | None:
        """The rank whose failure this record reports: the rank that printed it, unless it names another."""
        return self.rank

    def _fields(self, *names: str) -> dict[str, Any]:
        """The named fields that are set, under their own names."""
        return {n: v for n in names if (v := getattr(self, n)) is not None}
