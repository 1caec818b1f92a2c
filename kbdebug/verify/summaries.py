"""Small read-backs shared by the checks: numbers, positions and value counts of a tensor, each
computed with one reduction so a check reads back only summaries, never the data."""

from __future__ import annotations

from typing import Any

import torch

from kbdebug.core.values import plain_number

MAX_POSITIONS = 10
HISTOGRAM = 20


num = plain_number  # one way to write a value everywhere (kbdebug.core.values)


def positions(mask: torch.Tensor, limit: int) -> list[list[int]]:
    if limit <= 0:
        return []
    return torch.nonzero(mask)[:limit].tolist()


def value_counts(t: torch.Tensor, limit: int = HISTOGRAM) -> list[tuple[Any, int]]:
    """(value, count) of the most frequent values, in value order (a label set at a glance)."""
    values, counts = torch.unique(t.detach().flatten(), return_counts=True)
    if values.numel() > limit:
        top = torch.topk(counts, limit).indices
        values, counts = values[top], counts[top]
        order = torch.argsort(values)
        values, counts = values[order], counts[order]
    return [(num(v), int(c)) for v, c in zip(values.tolist(), counts.tolist(), strict=True)]


def histogram(t: torch.Tensor, limit: int = HISTOGRAM) -> dict[str, int]:
    return {str(v): c for v, c in value_counts(t, limit)}


def offending(t: torch.Tensor, mask: torch.Tensor, limit: int = HISTOGRAM) -> tuple[list[Any], dict[str, int]]:
    counts = value_counts(t.detach()[mask], limit)
    return [v for v, _ in counts], {str(v): c for v, c in counts}


def describe_shape(t: torch.Tensor) -> str:
    return f"[{', '.join(str(s) for s in t.shape)}] {str(t.dtype).replace('torch.', '')} on {t.device}"


def classes_first(rank: int) -> str:
    """The permute that moves a channels-last tensor's last dim to dim 1 (`.permute(0, 3, 1, 2)` for 4 dims).
    The same call as the guides' `phrase.classes_first`: a permute, never a view, which would scramble."""
    return f".permute(0, {rank - 1}{''.join(f', {d}' for d in range(1, rank - 1))})" if rank > 2 else ""
