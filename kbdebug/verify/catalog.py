"""The verifier's public functions and the table that runs a rule's checks on the user's tensors (needs torch)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kbdebug.core.shapes import channels_last
from kbdebug.verify.checks import (
    check_bce_inputs,
    check_class_targets,
    check_devices,
    check_divisible,
    check_embedding_ids,
    check_finite,
    check_index,
    check_probabilities,
    check_segmentation,
    check_shapes,
    check_target_dtype,
)
from kbdebug.verify.environment import check_build, check_oom_context, largest_tensors
from kbdebug.verify.guard_mode import guard
from kbdebug.verify.result import CheckResult
from kbdebug.verify.stages import Audit, audit, describe, print_describe, stats
from kbdebug.verify.summaries import classes_first

# Names users pass their tensors under, per role (the first one found wins).
ALIASES: dict[str, tuple[str, ...]] = {
    "target": ("target", "targets", "label", "labels", "y", "mask", "masks", "gt", "seg", "segmentation"),
    "logits": ("logits", "logit", "pred", "preds", "prediction", "output", "outputs", "out", "input", "y_pred", "scores"),
    "index": ("index", "idx", "indices"),
    "ids": ("input_ids", "ids", "tokens", "position_ids", "index", "indices"),
    "probs": ("probs", "p", "prob", "probabilities", "weights", "input", "pred"),
    "module": ("model", "module", "net", "embedding", "emb", "embed", "embeddings", "word_embeddings", "tok_embeddings"),
    "inputs": ("inputs", "x", "input", "batch", "images", "image"),
}


# The facts that name a role's tensor as the failing line calls it (`diagnose(exc)` reads them off the line).
_ROLE_FACTS: dict[str, tuple[str, ...]] = {
    "target": ("label_name", "index_tensor"),
    "logits": ("pred_name", "scores_tensor"),
    "index": ("index_tensor",),
    "ids": ("index_tensor",),
}


def _pick(tensors: dict[str, Any], role: str, facts: dict[str, Any] | None = None) -> Any:
    """The tensor playing `role`: the one the diagnosis named on the failing line, else the first alias given."""
    for key in _ROLE_FACTS.get(role, ()):
        name = (facts or {}).get(key)
        if isinstance(name, str) and name in tensors:
            return tensors[name]
    for name in ALIASES[role]:
        if name in tensors:
            return tensors[name]
    return None


# A binary cross-entropy call (the message or the failing lines say so): float targets of the input's shape.
_BCE = re.compile(r"(?i)binary_cross_entropy|\bBCE(?:WithLogits)?Loss\b|\bbce\b")


# Messages only binary cross-entropy prints: its same-shape check and its [0, 1] range check.
_BCE_TEMPLATES = frozenset({"target_size", "bce_range"})


def _is_bce(facts: dict[str, Any]) -> bool:
    """The op that failed is binary cross-entropy: its own message, the function that raised, or the line."""
    if facts.get("message_template") in _BCE_TEMPLATES:
        return True
    text = " ".join(str(facts.get(k) or "") for k in ("user_code", "raised_code", "raised_function", "error_message", "op"))
    return bool(_BCE.search(text))


def _converted_on_line(facts: dict[str, Any], name: str | None) -> str | None:
    """`masks.float()` on the failing line: the captured `masks` is not the dtype the op got."""
    if not name:
        return None
    m = re.search(
        rf"\b{re.escape(name)}\s*\.\s*(?:float|double|half|bfloat16|long|int|to|type)\([^()]*\)", str(facts.get("user_code") or "")
    )
    return m.group(0) if m else None


def _index_to_bce_fix(facts: dict[str, Any], label: Any, pred: Any, squeeze: str = "") -> str:
    """Class indices `[B, ...]` (or `[B, 1, ...]`: `squeeze=".squeeze(1)"`) against `[B, C, ...]` scores:
    cross-entropy takes them, BCE their one-hot, its classes at dim 1 like the scores."""
    name, pname = facts.get("label_name") or "target", facts.get("pred_name") or "logits"
    rank, classes = pred.dim(), pred.shape[1]
    perm = classes_first(rank)
    return (
        f"the target holds class indices: nn.CrossEntropyLoss()({pname}, {name}{squeeze}.long()); to keep BCE, one-hot "
        f"encode it with the classes at dim 1: F.one_hot({name}{squeeze}.long(), {classes}){perm}.float()"
    )


def _class_indices(label: Any, classes: int) -> bool:
    """Whole numbers in [0, classes) that are not only 0/1 (a binary mask is a head's problem, not the label's)."""
    import torch

    t = label.detach()
    if not t.numel() or (t.is_floating_point() and not torch.equal(t, t.round())):
        return False
    lo, hi = torch.stack([t.min(), t.max()]).double().tolist()
    return lo >= 0 and 1 < hi < classes


def _needs(name: str, *roles: str) -> CheckResult:
    want = " and ".join("/".join(ALIASES[r][:3]) + "=" for r in roles)
    return CheckResult(name=name, passed=None, finding=f"not run: pass {want}")


def _run_class_targets(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    if _is_bce(facts):
        return CheckResult(
            name="class_targets",
            passed=None,
            finding="not run: binary cross-entropy takes float targets of the input's shape, not class indices",
        )
    target, logits = _pick(t, "target", facts), _pick(t, "logits", facts)
    n = t.get("num_classes") or facts.get("num_classes")
    if target is None or (logits is None and n is None):
        return _needs("class_targets", "target", "logits")
    return check_class_targets(target, n, logits=logits, ignore_index=t.get("ignore_index", -100))


def _run_index(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    index = _pick(t, "index", facts)
    size = t.get("size") or facts.get("size") or facts.get("num_embeddings")
    src = t.get("src") or t.get("source")
    if index is None or (size is None and src is None):
        return (
            _needs("index_bounds", "index")
            if index is None
            else CheckResult(name="index_bounds", passed=None, finding="not run: pass size= or src= (and dim=)")
        )
    return check_index(
        index, size, src=src, dim=t.get("dim", facts.get("dim", 0)) or 0, allow_negative=bool(t.get("allow_negative", False))
    )


def _run_embedding(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    ids, emb = _pick(t, "ids", facts), _pick(t, "module")
    n = t.get("num_embeddings") or t.get("vocab_size") or t.get("max_position_embeddings")
    if ids is None or (emb is None and n is None):
        return _needs("embedding_ids", "ids", "module")
    return check_embedding_ids(ids, emb if hasattr(emb, "weight") else None, num_embeddings=n)


def _run_segmentation(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    label, pred = _pick(t, "target", facts), _pick(t, "logits", facts)
    if label is None or pred is None:
        return _needs("segmentation_layout", "target", "logits")
    if _is_bce(facts):  # BCE compares element-wise: any layout but the input's own shape is the crash itself
        ok = tuple(label.shape) == tuple(pred.shape)
        index = label.dim() + 1 == pred.dim() and pred.dim() >= 2 and pred.shape[1] > 1 and label.shape == pred.shape[:1] + pred.shape[2:]
        if ok:
            fix = ""
        elif index:
            fix = _index_to_bce_fix(facts, label, pred)
        elif (
            label.dim() == pred.dim() >= 3
            and label.shape[1] == 1
            and label.shape[2:] == pred.shape[2:]
            and _class_indices(label, pred.shape[1])
        ):
            fix = _index_to_bce_fix(facts, label, pred, squeeze=".squeeze(1)")
        elif channels_last(list(label.shape), list(pred.shape)):
            name = facts.get("label_name") or "target"
            fix = f"the target has its classes last: {name} = {name}{classes_first(label.dim())} (a permute; a view would scramble it)"
        else:
            fix = "give the prediction one channel per target channel (out_channels), or the target the prediction's channels"
        return CheckResult(
            name="segmentation_layout",
            passed=ok,
            values={"target_shape": list(label.shape), "input_shape": list(pred.shape)},
            finding="target and input have the same shape"
            if ok
            else f"binary cross-entropy needs the target in the input's shape: target {list(label.shape)}, input {list(pred.shape)}",
            fix=fix,
        )
    keys = ("num_classes", "to_onehot", "to_onehot_y", "softmax", "sigmoid", "include_background", "ignore_index")
    return check_segmentation(label, pred, **{k: t[k] for k in keys if k in t})


def _run_probabilities(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    if _is_bce(facts) or facts.get("kernel_file", "").startswith("Loss"):
        # binary cross-entropy's contract: its input (the failing line's prediction) and its target in [0, 1]
        p = _pick(t, "logits", facts) if any(facts.get(k) in t for k in _ROLE_FACTS["logits"]) else _pick(t, "probs")
        p = p if p is not None else _pick(t, "logits", facts)
        if p is None:
            return _needs("bce_inputs", "logits")
        return check_bce_inputs(p, _pick(t, "target", facts))
    p = _pick(t, "probs")
    if p is None:
        return _needs("probabilities", "probs")
    return check_probabilities(p, kind=t.get("kind", "multinomial"))


def _run_devices(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    module = next((t[n] for n in ("model", "module", "net") if n in t), None)
    if module is None:
        return _needs("devices", "module")
    rest = {k: v for k, v in t.items() if v is not module and hasattr(v, "device")}
    return check_devices(module, **rest)


def _run_finite(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    import torch

    named = {k: v for k, v in t.items() if isinstance(v, torch.Tensor)}
    return check_finite(**named) if named else CheckResult(name="finite", passed=None, finding="not run: pass tensors")


def _run_shapes(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    import torch

    named = {k: v for k, v in t.items() if isinstance(v, torch.Tensor)}
    if not named:
        return CheckResult(name="shapes", passed=None, finding="not run: pass the tensors of the failing call")
    return check_shapes(error_shapes=facts.get("shapes"), **named)


def _run_divisible(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    x = _pick(t, "inputs", facts)
    if x is None:
        return _needs("input_divisible", "inputs")
    return check_divisible(x, factor=int(t.get("factor") or facts.get("divisible_by") or 32))


def _run_target_dtype(facts: dict[str, Any], t: dict[str, Any]) -> CheckResult:
    target = _pick(t, "target", facts)
    if target is None:
        return _needs("target_dtype", "target")
    if "target" not in t and (conv := _converted_on_line(facts, facts.get("label_name") or facts.get("index_tensor"))):
        return CheckResult(name="target_dtype", passed=None, finding=f"not run: the failing line passes {conv}, not the captured tensor")
    loss = t.get("loss", "binary_cross_entropy" if _is_bce(facts) else "cross_entropy")
    return check_target_dtype(target, loss=loss, input=_pick(t, "logits", facts))


RUNNERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], CheckResult]] = {
    "class_targets": _run_class_targets,
    "index_bounds": _run_index,
    "embedding_ids": _run_embedding,
    "segmentation_layout": _run_segmentation,
    "probabilities": _run_probabilities,
    "devices": _run_devices,
    "finite": _run_finite,
    "shapes": _run_shapes,
    "target_dtype": _run_target_dtype,
    "input_divisible": _run_divisible,
    "build": lambda facts, t: check_build(),
    "oom_context": lambda facts, t: check_oom_context(),
}


def run_checks(names: list[str], facts: Mapping[str, Any], tensors: dict[str, Any]) -> list[CheckResult]:
    """Run the named checks with the user's values; a check that lacks its tensors says so."""
    out = []
    for name in names:
        runner = RUNNERS.get(name)
        if runner is None:
            out.append(CheckResult(name=name, passed=None, finding="unknown check"))
            continue
        try:
            out.append(runner(dict(facts), tensors))
        except (TypeError, ValueError, RuntimeError, IndexError) as exc:
            out.append(CheckResult(name=name, passed=None, finding=f"could not run: {type(exc).__name__}: {exc}"))
    return out


__all__ = [
    "Audit",
    "CheckResult",
    "RUNNERS",
    "audit",
    "check_bce_inputs",
    "check_build",
    "check_class_targets",
    "check_devices",
    "check_embedding_ids",
    "check_finite",
    "check_index",
    "check_oom_context",
    "check_probabilities",
    "check_segmentation",
    "check_divisible",
    "check_shapes",
    "check_target_dtype",
    "describe",
    "guard",
    "print_describe",
    "largest_tensors",
    "run_checks",
    "stats",
]
