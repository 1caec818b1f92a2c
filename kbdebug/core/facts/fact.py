"""What a fact's declaration says beside its type: what the fact means and who produces it.

The declarations themselves are kbdebug.core.facts.declared; this module is what they are written with.
"""

from dataclasses import dataclass
from typing import Literal

# Who produces facts. A record kind (its `kind`) says what its evidence holds; `records` is every kind.
# `live`: a live exception's frames (diagnose(exc)); `match`: the matcher (retry, inferred phrases);
# `caller`: what the caller of a diagnosis knows (the script it ran); `context`: the context stage
# (kbdebug.diagnoser.context); `guard`: what kbdebug.guard() reports with the error it raises.
Producer = Literal[
    "records",
    "kernel_assert",
    "exception",
    "cuda_error",
    "cpp_exception",
    "sanitizer",
    "sanitizer_summary",
    "oom",
    "library_error",
    "nccl",
    "elastic_failure",
    "message",
    "arch_warning",
    "process_exit",
    "job_event",
    "live",
    "match",
    "caller",
    "context",
    "guard",
    "nonfinite_loss",
    "kbdebug",
]


@dataclass(frozen=True)
class Fact:
    """A fact's declaration beside its type: what it means, and who produces it."""

    meaning: str
    by: tuple[Producer, ...]


Shape = list[int]
Number = int | float
Scalar = str | int | float | bool
