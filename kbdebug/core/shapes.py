"""How two tensor shapes relate: the evidence the shape rules decide on.

A library words a label/prediction mismatch its own way (BCE's `Target size`, a metric's
`ValueError`, a user's own `assert a.shape == b.shape`), but the mistake shows in the shapes
themselves: `[8, 1, 128, 128]` against `[8, 6, 128, 128]` differs only in the channel dim, whoever
printed it. The rules in `knowledge/` match on the relation named here (see "Boundaries between
the shape rules" in rule-ids.md), so every wording of the same mistake lands on the same rule.
"""

from __future__ import annotations

import math
from typing import Literal

from kbdebug import _regex_cache
from kbdebug.core.facts import Facts

Shape = list[int]
Relation = Literal["same", "batch", "channel", "class", "spatial", "rank", "mixed"]

# `torch.Size([8, 1, 128, 128])`, `[8, 1, 128, 128]`, `(8, 1, 128, 128)`: the ways a shape is printed.
_SHAPE = _regex_cache.compile(r"torch\.Size\(\[([\d,\s]*)\]\)|\[\s*(\d+(?:\s*,\s*\d+)+)\s*,?\s*\]|\(\s*(\d+(?:\s*,\s*\d+)+)\s*,?\s*\)")


def shapes_in(text: str, limit: int = 8) -> list[Shape]:
    """Every printed shape in a message, in order (at most `limit`; a dump of numbers is not a message)."""
    out: list[Shape] = []
    for m in _SHAPE.finditer(text):
        body = next(g for g in m.groups() if g is not None)
        dims = [int(d) for d in body.replace(" ", "").split(",") if d]
        out.append(dims)
        if len(out) >= limit:
            break
    return out


def relation(a: Shape, b: Shape) -> Relation:
    """What differs between two shapes, read as `[batch, channel, spatial...]`.

    - `channel`: rank >= 3, only dim 1 differs (label `[B,1,H,W]` vs logits `[B,C,H,W]`), or both
      flattened and one holds a whole number of the other's pixels (see `flattened_classes`), or the
      class dim was folded into the next one (see `onehot_merged`);
    - `class`: rank 2, only dim 1 differs (`[B,C]` vs `[B,K]`);
    - `batch`: only dim 0 differs;
    - `spatial`: the same rank and batch, dims after the channel differ (or several after the batch);
    - `rank`: the ranks differ (a missing or extra channel dim, one-hot vs index labels, or one side
      flattened: the same number of elements in other dims);
    - `mixed`: several of these at once.
    """
    if a == b:
        return "same"
    if onehot_merged(a, b):
        return "channel"
    if len(a) != len(b) and math.prod(a) == math.prod(b):
        # the same elements laid out in other dims: one side was flattened or reshaped (`[4, 5]` vs `[20]`,
        # `[18432, 2]` vs `[384, 48, 2]`), a rank mismatch even where a leading dim happens to differ
        return "rank"
    if len(a) != len(b):
        # class-index targets have no class dim: compare `[N, C, d...]` without C against `[N, d...]`
        longer, shorter = (a, b) if len(a) > len(b) else (b, a)
        if len(longer) == len(shorter) + 1 and len(longer) >= 2:
            rest = longer[:1] + longer[2:]
            if rest[1:] == shorter[1:] and rest[0] != shorter[0]:
                return "batch"
            if rest[0] == shorter[0] and rest[1:] != shorter[1:] and longer[1] != 1:
                return "spatial"  # `[N, C, H, W]` scores against `[N, h, w]` indices: the sizes, not the layout
        return "rank"
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(a) == 1 and flattened_classes(a[0], b[0]) is not None:
        return "channel"  # both flattened: the class dim went into one of them
    if diff == [0]:
        return "batch"
    if diff == [1]:
        return "channel" if len(a) >= 3 else "class"
    if min(diff) >= 2 or (min(diff) >= 1 and len(diff) >= 2):
        return "spatial"  # `[B,H,W]` masks have no channel dim: several dims after the batch differ
    return "mixed"


# A flattened dense label holds a pixel count: more elements than any batch of samples (64 x 64).
MIN_FLAT_PIXELS = 4096
MAX_CLASSES = 4096


def flattened_classes(a: int, b: int) -> int | None:
    """`6750208` elements against `65536`: a prediction flattened with its class dim against a label
    flattened without one (103 classes of 256 x 256 pixels against one label channel). The class count
    when the larger is a whole multiple of a pixel count, else None (`60` vs `10` is a batch mismatch)."""
    small, big = sorted((a, b))
    if small < MIN_FLAT_PIXELS or big % small:
        return None
    k = big // small
    return k if 2 <= k <= MAX_CLASSES else None


def onehot_merged(a: Shape, b: Shape) -> bool:
    """`[2, 2, 32, 32, 32]` against `[2, 64, 32, 32]`: the shorter is the longer with its class dim folded into the
    next one (2 x 32 = 64). A label that lost its channel dim (`y.argmax(1)`) and was then one-hot encoded by a
    loss along dim 1, which it took for the class dim: the label's channels stacked into a spatial dim."""
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    if len(longer) != len(shorter) + 1 or len(longer) < 4 or not 2 <= longer[1] <= MAX_CLASSES:
        return False
    return shorter == [longer[0], longer[1] * longer[2], *longer[3:]]


def differing_dims(a: Shape, b: Shape) -> list[int]:
    if len(a) != len(b):
        return []
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def squeezed_rank_match(a: Shape, b: Shape) -> bool:
    """`[B,1,H,W]` vs `[B,H,W]`: the same tensor but for a singleton channel dim."""
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return len(longer) == len(shorter) + 1 and len(longer) >= 3 and longer[1] == 1 and longer[:1] + longer[2:] == shorter


def channels_last(a: Shape, b: Shape) -> bool:
    """`a` is `b` with its channel dim (1) moved last: `[2, 32, 32, 4]` against `[2, 4, 32, 32]`, what
    `F.one_hot` or an image loader (HWC) gives. The same values in another order: a permute fixes it, and a
    view or reshape to `b`'s shape would scramble them silently."""
    return len(a) == len(b) >= 3 and a != b and a == b[:1] + b[2:] + b[1:2]


def shape_facts(input_shape: Shape | None, target_shape: Shape | None) -> Facts:
    """Facts about a prediction (`input_shape`) and a label (`target_shape`) pair, for rules and guides."""
    facts: Facts = {}
    if input_shape is None or target_shape is None:
        return facts
    facts["input_shape"] = input_shape
    facts["target_shape"] = target_shape
    rel = relation(input_shape, target_shape)
    facts["shape_relation"] = rel
    facts["differing_dims"] = differing_dims(input_shape, target_shape)
    if len(input_shape) >= 2:
        facts["input_channels"] = input_shape[1]
    if len(target_shape) >= 2 and len(target_shape) == len(input_shape):
        facts["target_channels"] = target_shape[1]
    if channels_last(target_shape, input_shape):
        facts["channels_last"] = "label"
    elif channels_last(input_shape, target_shape):
        facts["channels_last"] = "prediction"
    return facts
