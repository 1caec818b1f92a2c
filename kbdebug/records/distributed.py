"""Distributed failures: NCCL's own reports (watchdog timeouts, errors, aborts) and the rows of torchrun's failure table."""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
from typing import Any, Literal

from pydantic import ConfigDict, field_validator

from kbdebug.core.facts import Facts
from kbdebug.core.stamps import parse_stamp
from kbdebug.records.base import Record
from kbdebug.records.job import signal_of_status


class NcclEvent(Record):
    kind: Literal["nccl"] = "nccl"
    FIELD_FACTS = ("op_type", "seq_num", "timeout_ms", "ran_for_ms", "nccl_error")
    event: Literal["watchdog_timeout", "failure", "aborted", "watchdog_exception"]
    text: str
    op_type: str | None = None
    seq_num: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int | None = None
    nccl_error: str | None = None

    def facts(self) -> Facts:
        return super().facts() | self._fields(*self.FIELD_FACTS) | {"nccl_event": self.event}


class ElasticFailure(Record):
    """One row of torch.distributed.elastic's `Root Cause` / `Other Failures` table."""

    kind: Literal["elastic_failure"] = "elastic_failure"
    root: bool
    failed_rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    host: str | None = None
    error_file: str | None = None
    signal: str | None = None  # `traceback : Signal 9 (SIGKILL) received by PID 1234`
    # the table's `time : 2025-03-01_10:00:00` is set after the record is made: read it as a stamp then too
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("time", mode="before")
    @classmethod
    def _stamp(cls, value: Any) -> Any:
        return parse_stamp(value) if isinstance(value, str) else value

    def failed_rank_of(self) -> int | None:
        return self.failed_rank if self.failed_rank is not None else self.rank

    def facts(self) -> Facts:
        f = super().facts() | self._fields("local_rank", "exitcode", "host")
        if self.exitcode is not None:  # torchrun's -9 is the worker's signal; a positive code its own exit
            f["exit_code"] = self.exitcode
            if (signal := self.signal or signal_of_status(self.exitcode)) is not None:
                f["signal"] = signal
        if self.time is not None:
            f["time"] = self.time.text
        if self.failed_rank is not None:
            f["rank"] = self.failed_rank
        return f
