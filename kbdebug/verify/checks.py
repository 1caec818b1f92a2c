"""Targeted checks on the user's own tensors. Each one runs on the tensor's device, reads back
only small summaries, never changes its inputs, and returns a `CheckResult` with numbers.

The checks on the machine rather than the tensors (the build against the GPU, what holds memory at an
OOM) live in environment.py; label and layout checks with more logic in labels.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from kbdebug.core.shapes import channels_last
from kbdebug.core.values import dtype_name
from kbdebug.verify.labels import check_class_targets, check_segmentation
from kbdebug.verify.result import CheckResult
from kbdebug.verify.stages import walk_tensors
from kbdebug.verify.summaries import MAX_POSITIONS, classes_first
from kbdebug.verify.summaries import describe_shape as _describe_shape
from kbdebug.verify.summaries import num as _num
from kbdebug.verify.summaries import offending as _offending
from kbdebug.verify.summaries import positions as _positions

__all__ = ["check_class_targets", "check_segmentation"]  # re-exported: their home is labels.py


# -- indices ----------------------------------------------------------------------------------------
def check_index(
    index: torch.Tensor,
    size: int | None = None,
    *,
    src: torch.Tensor | None = None,
    dim: int = 0,
    allow_negative: bool = False,
    what: str = "index",
    max_positions: int = MAX_POSITIONS,
) -> CheckResult:
    """An index tensor for gather/scatter/index_select/embedding/indexing against the indexed size."""
    name = "index_bounds"
    if size is None:
        if src is None:
            raise TypeError("check_index needs size= or src=")
        size = int(src.size(dim))
    lo = -size if allow_negative else 0
    values: dict[str, Any] = {
        "size": size,
        "valid_range": [lo, size - 1],
        "shape": list(index.shape),
        "dtype": dtype_name(index.dtype),
    }
    if index.is_floating_point() or index.dtype == torch.bool:
        return CheckResult(
            name=name,
            passed=False,
            values=values,
            finding=f"{what} is {values['dtype']}; indices must be int64 (or int32)",
            fix=f"{what} = {what}.long()",
        )
    if index.numel() == 0:
        return CheckResult(name=name, passed=True, values=values, finding=f"{what} is empty")
    t = index.detach()
    mn, mx = torch.stack(list(torch.aminmax(t))).tolist()
    values.update(min=mn, max=mx)
    if lo <= mn and mx < size:
        return CheckResult(
            name=name, passed=True, values=values, finding=f"all {t.numel()} values of {what} in [{lo}, {size}) (min {mn}, max {mx})"
        )
    bad = (t < lo) | (t >= size)
    offending, hist = _offending(t, bad)
    count = int(bad.sum())
    values.update(out_of_range=count, offending_counts=hist)
    if mx >= size:
        fix = (
            f"{what} reaches {mx} but the dimension has {size} entries: enlarge it to at least {mx + 1} "
            "(vocab size, max positions, num_classes) or fix the ids (tokenizer/model mismatch, labels used as indices)"
        )
    else:
        fix = f"{what} holds negative values ({mn}); this op does not wrap them: mask or remap them"
    return CheckResult(
        name=name,
        passed=False,
        values=values,
        offending=offending,
        positions=_positions(bad, max_positions),
        finding=f"{count} of {t.numel()} values of {what} outside [{lo}, {size}): " + ", ".join(f"{v} (x{c})" for v, c in hist.items()),
        fix=fix,
    )


def check_embedding_ids(
    ids: torch.Tensor,
    embedding: Any = None,
    *,
    num_embeddings: int | None = None,
    what: str = "input_ids",
    max_positions: int = MAX_POSITIONS,
) -> CheckResult:
    """Token or position ids against an nn.Embedding (or its size): id >= vocab size is the classic."""
    if num_embeddings is None:
        if embedding is None:
            raise TypeError("check_embedding_ids needs embedding= or num_embeddings=")
        num_embeddings = int(getattr(embedding, "num_embeddings", None) or embedding.weight.shape[0])
    res = check_index(ids, num_embeddings, what=what, max_positions=max_positions)
    res.name = "embedding_ids"
    return res


# -- probabilities ----------------------------------------------------------------------------------
def check_probabilities(
    p: torch.Tensor, *, kind: str = "multinomial", rows_sum_positive: bool | None = None, max_positions: int = MAX_POSITIONS
) -> CheckResult:
    """Inputs of multinomial (non-negative, finite, rows with a positive sum), bernoulli / BCE ([0, 1])."""
    name = "probabilities"
    if not p.is_floating_point():
        return CheckResult(
            name=name, passed=False, finding=f"probabilities are {p.dtype}; they must be floating point", fix="p = p.float()"
        )
    if p.numel() == 0:
        return CheckResult(name=name, passed=True, finding="empty tensor")
    t = p.detach()
    unit = kind in ("bernoulli", "bce", "binary_cross_entropy")
    if rows_sum_positive is None:
        rows_sum_positive = kind == "multinomial"
    finite = torch.isfinite(t)
    row_sums = t.sum(-1) if rows_sum_positive else t.new_ones(())
    stats = torch.stack(
        [
            t.nan_to_num(0, 0, 0).min(),
            t.nan_to_num(0, 0, 0).max(),
            t.isnan().sum().to(t.dtype),
            t.isinf().sum().to(t.dtype),
            (t < 0).sum().to(t.dtype),
            (t > 1).sum().to(t.dtype),
            (row_sums <= 0).sum().to(t.dtype) if rows_sum_positive else t.new_zeros(()),
        ]
    ).tolist()
    mn, mx, n_nan, n_inf, n_neg, n_gt1, zero_rows = stats
    values = {
        "min": _num(mn),
        "max": _num(mx),
        "nan": int(n_nan),
        "inf": int(n_inf),
        "negative": int(n_neg),
        "above_one": int(n_gt1),
        "shape": list(t.shape),
        "kind": kind,
    }
    if rows_sum_positive:
        values["rows_summing_to_zero"] = int(zero_rows)
    problems = []
    if n_nan:
        problems.append(f"{int(n_nan)} NaN")
    if n_inf:
        problems.append(f"{int(n_inf)} inf")
    if n_neg:
        problems.append(f"{int(n_neg)} negative (min {_num(mn)})")
    if unit and n_gt1:
        problems.append(f"{int(n_gt1)} above 1 (max {_num(mx)})")
    if rows_sum_positive and zero_rows:
        problems.append(f"{int(zero_rows)} rows summing to <= 0")
    if not problems:
        rng = "[0, 1]" if unit else "[0, inf)"
        return CheckResult(
            name=name, passed=True, values=values, finding=f"all {t.numel()} values finite and in {rng} (min {_num(mn)}, max {_num(mx)})"
        )
    bad = ~finite | (t < 0) | ((t > 1) if unit else torch.zeros_like(finite))
    if n_nan or n_inf:
        fix = (
            f"{int(n_nan)} NaN / {int(n_inf)} inf came from upstream: check the loss scale, log of 0, division by zero; "
            "torch.autograd.set_detect_anomaly(True)"
        )
    elif unit and (mn < 0 or mx > 1):
        fix = "these look like logits: apply sigmoid first, or use BCEWithLogitsLoss / bernoulli(logits=...)"
    elif rows_sum_positive and zero_rows:
        fix = f"{int(zero_rows)} rows are all zeros (every option masked out): keep at least one positive entry or add a small epsilon"
    else:
        fix = (
            f"values reach {_num(mn)} (negative): use softmax(logits) (not raw logits) as probabilities, "
            "or torch.distributions.Categorical(logits=...)"
        )
    return CheckResult(
        name=name,
        passed=False,
        values=values,
        positions=_positions(bad, max_positions),
        offending=_offending(t, bad)[0] if bad.any() else [],
        finding=f"{kind} input has " + ", ".join(problems),
        fix=fix,
    )


def check_bce_inputs(input: torch.Tensor, target: torch.Tensor | None = None) -> CheckResult:
    """BCELoss wants probabilities in [0, 1] for input *and* target; both are checked and both reported,
    since fixing one (a sigmoid on the logits) leaves the other (a 0/2 or 0/255 mask) still failing."""
    res = check_probabilities(input, kind="bce")
    res.name = "bce_inputs"
    if target is None:
        return res
    tres = check_probabilities(target if target.is_floating_point() else target.float(), kind="bce")
    res.values = {**res.values, "target": tres.values}
    if tres.passed:
        return res
    tv = tres.values
    if tv.get("nan") or tv.get("inf"):
        tfix = "the target holds NaN/inf: clean the labels where they are loaded"
    elif tv["max"] == 255:
        tfix = "the target is a 0..255 mask: binarise it, (target > 0).float(), or scale it, target / 255"
    elif tv["min"] >= 0 and float(tv["max"]).is_integer():
        tfix = (
            f"the target holds whole numbers up to {tv['max']}: BCE targets are probabilities in [0, 1]; "
            f"for {tv['max'] + 1} class indices use cross_entropy, for a binary mask (target > 0).float()"
        )
    else:
        tfix = f"the target lies in [{tv['min']}, {tv['max']}]: rescale it into [0, 1] (e.g. -1/1 labels: (target + 1) / 2)"
    findings = ([f"input: {res.finding.split(' has ', 1)[-1]}"] if res.passed is False else []) + [
        f"target: {tres.finding.split(' has ', 1)[-1]}"
    ]
    fixes = ([res.fix] if res.passed is False else []) + [tfix]
    return CheckResult(
        name="bce_inputs",
        passed=False,
        values=res.values,
        offending=tres.offending,
        positions=tres.positions,
        finding="; ".join(findings),
        fix="; ".join(fixes),
    )


# -- devices and dtypes -------------------------------------------------------------------------------
def check_devices(module: torch.nn.Module, *inputs: Any, **named: Any) -> CheckResult:
    """Where every parameter, buffer and input lives; more than one device is the mismatch."""
    by_device: dict[str, list[str]] = {}
    for kind, items in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        for pname, t in items:
            by_device.setdefault(str(t.device), []).append(f"{kind} {pname}")
    module_devices = sorted(by_device)
    for path, t in _chain_iters(inputs, named):
        by_device.setdefault(str(t.device), []).append(path)
    values = {dev: {"count": len(names), "examples": names[:5]} for dev, names in by_device.items()}
    if len(by_device) <= 1:
        dev = next(iter(by_device), "no tensors")
        return CheckResult(name="devices", passed=True, values=values, finding=f"model and inputs all on {dev}")
    parts = [f"{dev}: {len(n)} ({', '.join(n[:3])}{', ...' if len(n) > 3 else ''})" for dev, n in by_device.items()]
    target = module_devices[0] if len(module_devices) == 1 else "one device"
    return CheckResult(
        name="devices",
        passed=False,
        values=values,
        finding="tensors on several devices: " + "; ".join(parts),
        fix=f"move everything to {target}: model.to(device) once, and x.to(device) for every input and target",
    )


def _chain_iters(inputs: tuple[Any, ...], named: dict[str, Any]) -> Iterable[tuple[str, torch.Tensor]]:
    for i, x in enumerate(inputs):
        yield from walk_tensors(x, f"input {i}")
    for k, v in named.items():
        yield from walk_tensors(v, k)


_INDEX_LOSSES = ("cross_entropy", "nll_loss", "nll")
_FLOAT_LOSSES = ("bce", "binary_cross_entropy", "bce_with_logits", "mse", "l1", "smooth_l1", "dice")


def check_target_dtype(target: torch.Tensor, *, loss: str = "cross_entropy", input: torch.Tensor | None = None) -> CheckResult:
    """cross_entropy/nll want int64 class indices (or float probabilities of the input's shape);
    BCE/MSE/Dice want a floating target of the input's dtype."""
    dt = dtype_name(target.dtype)
    values: dict[str, Any] = {"dtype": dt, "loss": loss}
    if loss in _INDEX_LOSSES:
        if target.dtype == torch.long:
            return CheckResult(name="target_dtype", passed=True, values=values, finding="int64 class indices")
        if target.is_floating_point() and input is not None and target.shape == input.shape:
            return CheckResult(name="target_dtype", passed=True, values=values, finding=f"{dt} class probabilities")
        if target.is_floating_point() and target.numel() and not bool((target == target.round()).all()):
            shape = f" {list(input.shape)}" if input is not None else ""
            return CheckResult(
                name="target_dtype",
                passed=False,
                values=values,
                finding=f"{loss} got a {dt} target with fractional values: class probabilities, in another shape than the input",
                fix=f"keep the probabilities float (.long() would make them 0) and give them the input's shape{shape}",
            )
        return CheckResult(
            name="target_dtype",
            passed=False,
            values=values,
            finding=f"{loss} needs int64 class indices, the target is {dt}",
            fix=f"target = target.long()  (an index mask loaded as {dt} must be converted)",
        )
    if loss in _FLOAT_LOSSES:
        want = input.dtype if input is not None else None
        if target.is_floating_point() and (want is None or target.dtype == want):
            return CheckResult(name="target_dtype", passed=True, values=values, finding=f"floating target ({dt})")
        wname = dtype_name(want) if want is not None else "a floating dtype"
        return CheckResult(
            name="target_dtype",
            passed=False,
            values=values,
            finding=f"{loss} needs a {wname} target, got {dt}",
            fix=f"target = target.to({'input.dtype' if want is not None else 'torch.float32'})",
        )
    raise ValueError(f"unknown loss {loss!r}; use one of {', '.join(_INDEX_LOSSES + _FLOAT_LOSSES)}")


def check_divisible(x: torch.Tensor, factor: int = 32) -> CheckResult:
    """Whether an image batch's spatial sizes are multiples of a network's total downsampling factor (a U-Net's
    2 ** depth, an encoder's output stride): each pooling floors an odd size, and a skip connection then joins
    maps one pixel apart (concat_size_mismatch). Reads only the shape."""
    spatial = [int(s) for s in (x.shape[2:] if x.dim() >= 4 else x.shape[-2:])]
    powers = [s & -s for s in spatial]  # the largest power of two each size holds: how many halvings stay exact
    padded = [-(-s // factor) * factor for s in spatial]
    values: dict[str, Any] = {"spatial": spatial, "factor": factor, "largest_power_of_two": powers, "padded": padded}
    if all(s % factor == 0 for s in spatial):
        return CheckResult(name="input_divisible", passed=True, values=values, finding=f"spatial sizes {spatial} are multiples of {factor}")
    pad = ", ".join(f"0, (-{d}) % {factor}" for d in ("w", "h")[: len(spatial)])
    return CheckResult(
        name="input_divisible",
        passed=False,
        values=values,
        finding=f"spatial sizes {spatial} are not all multiples of {factor}: they halve exactly only {min(powers).bit_length() - 1} times",
        fix=f"pad to {padded}: h, w = x.shape[-2:]; x = F.pad(x, ({pad}))" if len(spatial) == 2 else f"pad or resize to {padded}",
    )


def check_finite(*tensors: torch.Tensor, **named: torch.Tensor) -> CheckResult:
    """NaN and inf counts of each tensor: where a NaN loss starts."""
    found: dict[str, dict[str, int]] = {}
    for path, t in _chain_iters(tensors, named):
        if t.is_floating_point() or t.is_complex():
            n_nan, n_inf = torch.stack([t.detach().isnan().sum(), t.detach().isinf().sum()]).tolist()
            found[path] = {"nan": int(n_nan), "inf": int(n_inf)}
    bad = {k: v for k, v in found.items() if v["nan"] or v["inf"]}
    if not bad:
        return CheckResult(name="finite", passed=True, values=found, finding=f"no NaN or inf in {len(found)} tensors")
    return CheckResult(
        name="finite",
        passed=False,
        values=found,
        finding="; ".join(f"{k}: {v['nan']} NaN, {v['inf']} inf" for k, v in bad.items()),
        fix=f"find the first stage that produces them in {', '.join(bad)}: kbdebug.audit(model) records nan/inf per module",
    )


def check_shapes(*tensors: torch.Tensor, error_shapes: list[list[int]] | None = None, **named: torch.Tensor) -> CheckResult:
    """Shape, dtype and device of each tensor, and which of them appear in the shape error."""
    table = {path: _describe_shape(t) for path, t in _chain_iters(tensors, named)}
    values: dict[str, Any] = {"tensors": table}
    if not error_shapes:
        return CheckResult(name="shapes", passed=None, values=values, finding="; ".join(f"{k} {v}" for k, v in table.items()))
    hits = {path: list(t.shape) for path, t in _chain_iters(tensors, named) if list(t.shape) in error_shapes}
    values["in_error"] = hits
    if hits:
        moved = [(k, v) for k, v in hits.items() if any(channels_last(v, other) for other in error_shapes)]
        if moved:  # the same values in another order of dims: only a permute restores them
            fix = "; ".join(
                f"{k} has its channels last: {k} = {k}{classes_first(len(v))} (never a view: it would scramble)" for k, v in moved
            )
        else:
            fix = f"fix the layout of {', '.join(hits)} (view/permute/squeeze) or the size of the layer it meets"
        return CheckResult(
            name="shapes",
            passed=False,
            values=values,
            finding="the error's shapes are " + "; ".join(f"{k} {v}" for k, v in hits.items()),
            fix=fix,
        )
    return CheckResult(
        name="shapes",
        passed=True,
        values=values,
        finding=f"none of the given tensors has a shape from the error {error_shapes}: the mismatch is elsewhere",
    )
