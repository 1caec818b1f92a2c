"""Class labels against a class count: `check_class_targets` (cross_entropy / nll_loss) and
`check_segmentation` (label vs prediction layout, MONAI settings as plain values).

Both name a bad label set with one vocabulary, `label_advice`, so `Diagnosis.verify()` and a direct
call never disagree: an "ignore" value (255, -1) is an ignore value, labels 1..C are 1-based, labels
0..C or beyond mean the head is too small (or the data has a class it should not), and every
sentence carries the user's own numbers.
"""

from __future__ import annotations

from typing import Any

import torch

from kbdebug.core.shapes import channels_last
from kbdebug.core.values import dtype_name
from kbdebug.verify.result import CheckResult
from kbdebug.verify.summaries import MAX_POSITIONS, classes_first, histogram, num, offending, positions

# Values datasets use to mean "no label here" (uint8 255, padding -1, int16/uint16 sentinels).
IGNORE_LIKE = frozenset({255, -1, 250, 254, 65535, -100})


def _listed(values: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def label_advice(
    bad: list[Any], low: int, high: int, classes: int, ignore_index: int | None, *, head: str = "the model's output size", keep: str = ""
) -> str:
    """What to do about labels outside [0, classes): one sentence per kind of bad value.

    `bad` are the distinct offending values, `low`/`high` the min/max of the labels that are not
    ignore values, `keep` a setting that is right already (e.g. "keep to_onehot=14").
    """
    ints = sorted({int(v) for v in bad if float(v).is_integer()})
    ignores = [v for v in ints if v in IGNORE_LIKE and v != ignore_index]
    real = [v for v in ints if v not in ignores]
    parts = []
    now = f" (it is {ignore_index})" if ignore_index is not None else ""
    if len(ignores) > 1:  # a loss takes one ignore_index: the others must be mapped onto it first
        keep_v, rest = ignores[-1], ignores[:-1]
        remap = "; ".join(f"target[target == {v}] = {keep_v}" for v in rest)
        parts.append(
            f"{_listed(ignores)} all look like 'ignore' labels, and a loss takes one ignore_index: remap the others onto one "
            f"({remap}) and pass ignore_index={keep_v}{now}"
        )
    for v in ignores if len(ignores) == 1 else ():
        parts.append(f"{v} looks like an 'ignore' label: pass ignore_index={v} to the loss{now}, or remap it before the loss")
    negative = [v for v in real if v < 0]
    above = [v for v in real if v >= classes]
    if negative:
        parts.append(f"negative labels ({_listed(negative)}): remap them into [0, {classes}) or set ignore_index to the padding value")
    if above and low >= 1 and high == classes:
        parts.append(
            f"labels look 1-based (min {low}, max {high} for {classes} classes): use target - 1, "
            f"or, if label 0 is a real class too, {head} {classes + 1}"
        )
    elif above:
        extra = f" ({keep})" if keep else ""
        which = "label" if len(above) == 1 else "labels"
        parts.append(
            f"the labels have {high + 1} classes (0..{high}) and the head {classes}: set {head} to {high + 1}{extra}, "
            f"or, if {classes} is right, find where {which} {_listed(above)} come{'s' if len(above) == 1 else ''} from"
        )
    return "; ".join(parts)


def check_class_targets(
    target: torch.Tensor,
    num_classes: int | None = None,
    *,
    logits: torch.Tensor | None = None,
    ignore_index: int | None = -100,
    class_dim: int = 1,
    max_positions: int = MAX_POSITIONS,
) -> CheckResult:
    """Class-index targets for cross_entropy / nll_loss: every value in [0, C) or == ignore_index."""
    name = "class_targets"
    if num_classes is None:
        if logits is None:
            raise TypeError("check_class_targets needs num_classes= or logits=")
        num_classes = int(logits.shape[class_dim] if logits.dim() > 1 else logits.shape[0])
    values: dict[str, Any] = {
        "num_classes": num_classes,
        "ignore_index": ignore_index,
        "shape": list(target.shape),
        "dtype": dtype_name(target.dtype),
    }
    if target.is_floating_point():
        if logits is not None and target.shape == logits.shape:
            mn, mx = (float(v) for v in torch.stack([target.min(), target.max()]).tolist()) if target.numel() else (0, 0)
            values.update(min=num(mn), max=num(mx))
            ok = 0 <= mn and mx <= 1
            return CheckResult(
                name=name,
                passed=ok,
                values=values,
                finding=f"class-probability targets, values in [{num(mn)}, {num(mx)}]"
                + ("" if ok else ": probabilities must lie in [0, 1]"),
                fix=""
                if ok
                else f"soft targets reach {num(mx) if mx > 1 else num(mn)}: normalise them (softmax, or divide by the row sum)",
            )
        if target.numel() and not bool((target == target.round()).all()):  # probabilities, not class numbers
            return CheckResult(
                name=name,
                passed=False,
                values=values,
                finding=f"target is {values['dtype']} with fractional values: class probabilities, not class indices",
                fix=_soft_fix(target, logits),
            )
        return CheckResult(
            name=name,
            passed=False,
            values=values,
            finding=f"target is {values['dtype']}; class-index targets must be an integer (int64) tensor",
            fix=f"target = target.long()  (it is {values['dtype']}; check the values are whole class numbers first)",
        )
    if target.numel() == 0:
        return CheckResult(name=name, passed=True, values=values, finding="target is empty")
    t = target.detach()
    mn, mx = torch.stack(list(torch.aminmax(t))).tolist()
    values.update(min=mn, max=mx, histogram=histogram(t))
    if 0 <= mn and mx < num_classes:
        return CheckResult(
            name=name, passed=True, values=values, finding=f"all {t.numel()} targets in [0, {num_classes}) (min {mn}, max {mx})"
        )
    bad = (t < 0) | (t >= num_classes)
    if ignore_index is not None:
        bad &= t != ignore_index
    count = int(bad.sum())
    if count == 0:
        return CheckResult(
            name=name, passed=True, values=values, finding=f"all targets in [0, {num_classes}) apart from ignore_index={ignore_index}"
        )
    bad_values, hist = offending(t, bad)
    values.update(out_of_range=count, offending_counts=hist)
    shown = ", ".join(f"{v} (x{c})" for v, c in hist.items())
    low, high = _real_range(t, ignore_index)
    return CheckResult(
        name=name,
        passed=False,
        values=values,
        offending=bad_values,
        positions=positions(bad, max_positions),
        finding=f"{count} of {t.numel()} targets outside [0, {num_classes}) (ignore_index={ignore_index}): {shown}",
        fix=label_advice(bad_values, low, high, num_classes, ignore_index),
    )


def _soft_fix(target: torch.Tensor, logits: torch.Tensor | None) -> str:
    """Soft labels: `.long()` would turn every probability into 0; they need the scores' shape instead."""
    want = f" {list(logits.shape)}" if logits is not None else ""
    return (
        f"keep it float (.long() would truncate the probabilities to 0) and give it the scores' shape{want}: "
        "one probability per class; or, if it should hold class indices, find where it became fractional"
    )


def _real_range(t: torch.Tensor, ignore_index: int | None) -> tuple[int, int]:
    """min/max of the labels that are neither the loss's ignore_index nor an ignore-like value."""
    keep = torch.ones_like(t, dtype=torch.bool)
    for v in IGNORE_LIKE | ({ignore_index} if ignore_index is not None else set()):
        keep &= t != v
    rest = t[keep]
    if rest.numel() == 0:
        return 0, -1
    mn, mx = torch.stack([rest.min(), rest.max()]).tolist()
    return int(mn), int(mx)


# -- segmentation -------------------------------------------------------------------------------------
def _layout(label: torch.Tensor, pred: torch.Tensor, channels: int) -> str:
    if label.dim() == pred.dim() and label.shape == pred.shape and channels > 1:
        return "one-hot"
    if label.dim() == pred.dim() and label.shape[1] == 1:
        return "index [B,1,...]"
    if label.dim() == pred.dim() - 1:
        return "index [B,...]"
    if channels_last(list(label.shape), list(pred.shape)):
        return "one-hot, classes last"
    return "unknown"


def check_segmentation(
    label: torch.Tensor,
    pred: torch.Tensor,
    *,
    num_classes: int | None = None,
    to_onehot: int | None = None,
    to_onehot_y: bool | None = None,
    softmax: bool | None = None,
    sigmoid: bool | None = None,
    include_background: bool | None = None,
    ignore_index: int | None = None,
) -> CheckResult:
    """Label vs prediction layout for segmentation, and MONAI-style settings given as plain values
    (`AsDiscrete(to_onehot=N)`, `DiceLoss(to_onehot_y=..., softmax=...)`), so MONAI is not needed.

    The class count has three homes (the head's channels, `to_onehot`, the labels); the advice names
    which one disagrees with the other two instead of a fix per mismatch that may contradict another.
    """
    problems: list[tuple[str, str]] = []
    if pred.dim() < 2:
        raise TypeError("pred must be [B, C, ...]")
    channels = int(pred.shape[1])
    layout = _layout(label, pred, channels)
    values: dict[str, Any] = {
        "label_shape": list(label.shape),
        "pred_shape": list(pred.shape),
        "pred_channels": channels,
        "label_dtype": dtype_name(label.dtype),
        "label_layout": layout,
    }
    real = channels if layout.startswith("one-hot") else None
    if layout == "one-hot, classes last":
        problems.append(
            (
                f"label {list(label.shape)} is one-hot with its classes last (channels-last, as F.one_hot gives it); "
                f"the prediction {list(pred.shape)} has them at dim 1",
                f"label = label{classes_first(label.dim())} (a permute: a view or reshape to {list(pred.shape)} would "
                "scramble the classes across positions)",
            )
        )
    if layout == "unknown":
        problems.append(
            (
                f"label {list(label.shape)} fits neither index [B,...]/[B,1,...] nor one-hot {list(pred.shape)} layout",
                f"make the label [B, 1, {', '.join(str(s) for s in pred.shape[2:])}] (index) or {list(pred.shape)} (one-hot)",
            )
        )
    spatial_label = list(label.shape[1:]) if layout == "index [B,...]" else list(label.shape[2:])
    if layout not in ("unknown", "one-hot, classes last") and spatial_label != list(pred.shape[2:]):
        problems.append(
            (
                f"spatial size differs: label {spatial_label} vs prediction {list(pred.shape[2:])}",
                f"resize/crop label and image with the same transform to {list(pred.shape[2:])} (nearest for labels)",
            )
        )
    if label.shape[0] != pred.shape[0]:
        problems.append(
            (
                f"batch size differs: label {label.shape[0]} vs prediction {pred.shape[0]}",
                "check the collate function and that label and image come from the same sample",
            )
        )
    if layout.startswith("index") and label.numel():
        real = _index_label_problems(label, channels, to_onehot, ignore_index, values, problems)
    elif layout == "one-hot" and label.numel():
        sums = label.detach().float().sum(1)
        mn, mx = torch.stack([sums.min(), sums.max()]).tolist()
        values["onehot_sum_range"] = [num(mn), num(mx)]
        if not (mn == 1 and mx == 1):
            problems.append(
                (
                    f"one-hot label channels sum to [{num(mn)}, {num(mx)}] per voxel instead of 1",
                    f"build the one-hot with the real class count ({channels}) and no ignore labels",
                )
            )
    if real is not None:
        values["real_class_count"] = real
    _setting_problems(layout, label, channels, real, num_classes, to_onehot, to_onehot_y, softmax, sigmoid, include_background, problems)
    if layout == "index [B,1,...]" and to_onehot_y is None and channels > 1:
        values["hint"] = "for cross_entropy squeeze the channel: label[:, 0].long()"
    if problems:
        return CheckResult(
            name="segmentation_layout",
            passed=False,
            values=values,
            finding="; ".join(p for p, _ in problems),
            fix="; ".join(dict.fromkeys(f for _, f in problems)),
        )
    return CheckResult(
        name="segmentation_layout",
        passed=True,
        values=values,
        finding=f"label {layout} {list(label.shape)} fits prediction {list(pred.shape)}" + (f" ({real} classes seen)" if real else ""),
    )


def _index_label_problems(
    label: torch.Tensor,
    channels: int,
    to_onehot: int | None,
    ignore_index: int | None,
    values: dict[str, Any],
    problems: list[tuple[str, str]],
) -> int | None:
    """The value range of an index label against the head; returns the real class count (max + 1)."""
    t = label.detach()
    if t.is_floating_point() and not torch.equal(t, t.round()):
        problems.append(
            ("index label holds non-integer values (interpolated with a non-nearest mode?)", "resample labels with mode='nearest'")
        )
    tt = t if ignore_index is None else t[t != ignore_index]
    if not tt.numel():
        return None
    mn, mx = (float(v) for v in torch.stack([tt.min().float(), tt.max().float()]).tolist())
    values.update(label_min=num(mn), label_max=num(mx), label_values=histogram(t))
    if not (mn < 0 or (mx >= channels and channels > 1)):
        return int(mx) + 1
    ints = tt.long()
    bad_mask = (ints < 0) | (ints >= channels)
    bad_values, _ = offending(ints, bad_mask)
    low, high = _real_range(ints, ignore_index)
    real = high + 1 if high >= 0 else None
    keep = f"keep to_onehot={to_onehot}" if to_onehot is not None and real is not None and to_onehot == real else ""
    shown = ", ".join(str(v) for v in bad_values[:5])
    problems.append(
        (
            f"label values {shown} outside [0, {channels}) for a prediction with {channels} channels (labels {num(mn)}..{num(mx)})",
            label_advice(bad_values, low, high, channels, ignore_index, head="the model's output channels", keep=keep),
        )
    )
    return real


def _setting_problems(
    layout: str,
    label: torch.Tensor,
    channels: int,
    real: int | None,
    num_classes: int | None,
    to_onehot: int | None,
    to_onehot_y: bool | None,
    softmax: bool | None,
    sigmoid: bool | None,
    include_background: bool | None,
    problems: list[tuple[str, str]],
) -> None:
    """MONAI-style settings against the head and the labels; a setting that agrees with the labels
    while the head does not is reported with the labels (above), not here."""
    if num_classes is not None and num_classes != channels:
        problems.append(
            (
                f"num_classes={num_classes} but the prediction has {channels} channels",
                f"set num_classes={channels}, or give the head {num_classes} outputs if the data has {num_classes} classes",
            )
        )
    if to_onehot is not None:
        head_too_small = real is not None and real > channels
        if to_onehot != channels and not (head_too_small and to_onehot == real):
            seen = f" (labels reach {real - 1})" if real is not None else ""
            problems.append(
                (
                    f"to_onehot={to_onehot} but the prediction has {channels} channels{seen}",
                    f"AsDiscrete(to_onehot={channels}) (the head's channel count)",
                )
            )
    if to_onehot_y is True and layout == "one-hot":
        problems.append((f"to_onehot_y=True but the label {list(label.shape)} is already one-hot", "set to_onehot_y=False"))
    if to_onehot_y is False and layout.startswith("index") and channels > 1:
        problems.append(
            (
                f"to_onehot_y=False with an index label {list(label.shape)} against {channels} channels "
                "('ground truth has different shape')",
                "set to_onehot_y=True (and softmax=True)",
            )
        )
    if softmax and channels == 1:
        problems.append(("softmax=True on a single-channel prediction is ignored", "use sigmoid=True for one foreground class"))
    if softmax and sigmoid:
        problems.append(
            (
                "softmax=True and sigmoid=True together",
                f"choose one: softmax=True for {channels} exclusive classes, sigmoid=True for independent ones",
            )
        )
    if include_background is False and channels == 1:
        problems.append(("include_background=False with one channel removes the only class", "keep include_background=True"))
