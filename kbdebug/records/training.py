"""A training run's own progress output: the first line whose loss is not a number (no exception needed: a
run whose loss turned NaN goes on printing it, or stops with its own message)."""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
from typing import Literal

from kbdebug.core.facts import Facts
from kbdebug.records.base import Record


class NonFiniteLoss(Record):
    """The first progress line whose loss is NaN or inf (`loss=nan`, `{'loss': nan, ...}`), where it says so the
    epoch and step it was printed at, and how many such lines the log holds."""

    kind: Literal["nonfinite_loss"] = "nonfinite_loss"
    loss_name: str  # the key as printed, unquoted: `loss`, `train_loss`, `val/loss`
    loss_value: str  # `nan`, `inf`, `NaN`
    epoch: str | None = None  # as printed: `3`, `1.25`
    step: str | None = None
    lines: int = 1  # progress lines with a non-finite loss

    def facts(self) -> Facts:
        out = super().facts()
        out |= {"loss_name": self.loss_name, "loss_value": self.loss_value, "nonfinite_loss_lines": self.lines}
        if self.epoch is not None:
            out["nonfinite_epoch"] = self.epoch
        if self.step is not None:
            out["nonfinite_step"] = self.step
        return out
