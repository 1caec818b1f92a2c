"""`kbdebug.guard()`: validate the arguments of the ops whose CUDA kernels assert, before they run.

A device-side assert reports nothing useful and poisons the CUDA context; the same bad value
caught before dispatch gives the op, the argument, the value, its position and the user's line,
without CUDA_LAUNCH_BLOCKING and without a restart. The fast path of each check is one
reduction (`aminmax` or a few stacked ones) on the tensor's own device and one read-back;
ops not in the table pass straight through.
"""

from __future__ import annotations

import linecache
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kbdebug.core.errors import KbdebugError
from kbdebug.core.values import plain_number

aten = torch.ops.aten
Check = Callable[[Any, tuple[Any, ...], dict[str, Any]], None]


def _user_site() -> tuple[str, str]:
    """`file:line` and source of the innermost frame outside torch, the stdlib and kbdebug."""
    from kbdebug.core.frames import is_library_file

    frame = sys._getframe(1)
    typed: FrameType | None = None  # `python -c` / stdin code: `<string>`, `<stdin>` (no file, but a line)
    while frame is not None:
        name = frame.f_code.co_filename
        if not is_library_file(name):
            code = linecache.getline(name, frame.f_lineno, frame.f_globals).strip()
            return f"{name}:{frame.f_lineno}", code
        if typed is None and name in ("<string>", "<stdin>"):
            typed = frame
        frame = frame.f_back  # type: ignore[assignment]
    if typed is not None:
        return f"{typed.f_code.co_filename}:{typed.f_lineno}", ""
    return "?", ""


def _fail(op: str, arg: str, t: torch.Tensor, bad: torch.Tensor, what: str, facts: dict[str, Any]) -> None:
    """Build the error from the failing mask (slow path only: runs once, when something is wrong)."""
    count = int(bad.sum())
    pos = torch.nonzero(bad)[:5].tolist()
    first_val = t[tuple(pos[0])].item() if pos and t.dim() else t.item()
    values = [_round(v) for v in torch.unique(t[bad])[:10].tolist()]
    site, code = _user_site()
    first_val = _round(first_val)
    facts = {
        "op": op,
        "argument": arg,
        "bad_value": first_val,
        "position": pos[0] if pos else [],
        "positions": pos,
        "bad_count": count,
        "numel": t.numel(),
        "bad_values": values,
        "shape": list(t.shape),
        "innermost_user_frame": site,
        **facts,
    }
    if code:
        facts["user_code"] = code
    facts.setdefault("target" if arg == "target" else "index", first_val)
    rule = rule_for_op(op)
    hint = fix_hint(values, facts)
    if hint:
        facts["fix_hint"] = hint
    where = f"position {pos[0]}" if pos and t.dim() else "the scalar"
    more = f" ({count} of {t.numel()} values bad: {values})" if count > 1 else ""
    msg = f"{op}: {arg} has {first_val} at {where}, {what}{more} [{rule}]\n  at {site}" + (f": {code}" if code else "")
    raise KbdebugError(msg + (f"\n  fix: {hint}" if hint else ""), rule=rule, facts=facts)


def fix_hint(bad_values: list[Any], facts: dict[str, Any]) -> str:
    """What to do, from the bad values alone: one value outside a class range, wherever it occurs, is a label
    that marks pixels or tokens to skip (pass it as `ignore_index`); several are labels past the class count."""
    n = facts.get("num_classes")
    if not isinstance(n, int) or not bad_values:
        return ""
    if len(bad_values) == 1:
        v = bad_values[0]
        return f"if {v} marks pixels/tokens to skip, pass ignore_index={v} to the loss; else remap it into [0, {n})"
    top = max(v for v in bad_values if isinstance(v, (int, float)))
    return f"labels reach {top}: the model needs num_classes >= {int(top) + 1}, or the labels must be remapped into [0, {n})"


def rule_for_op(op: str) -> str:
    """The cause a failed argument check of `op` stands for: the rule whose `guard_ops` lists it."""
    from kbdebug.kb import load_kb

    return next((r.id for r in load_kb().rules if op in r.guard_ops), "")


_round = plain_number  # one way to write a value everywhere (kbdebug.core.values)


def _range(op: str, arg: str, t: torch.Tensor, lo: int, hi: int, ignore: int | None = None, **facts: Any) -> None:
    if t.numel() == 0:
        return
    if t.is_floating_point() or t.dtype == torch.bool:
        return  # dtype errors are raised by torch itself, readably
    # one reduction and one read-back; ignored targets (-100 padding) are folded into the range first
    probe = t if ignore is None else torch.where(t == ignore, lo, t)
    mn, mx = torch.stack(list(torch.aminmax(probe))).tolist()
    if lo <= mn and mx < hi:
        return
    bad = (t < lo) | (t >= hi)
    if ignore is not None:
        bad &= t != ignore
    what = f"outside [{lo}, {hi})" + (f" (ignore_index={ignore})" if ignore is not None else "")
    _fail(op, arg, t, bad, what, {"valid_range": [lo, hi - 1], **facts})


def _unit(op: str, arg: str, t: torch.Tensor, logits_hint: str = "", **facts: Any) -> None:
    """Values must be finite and in [0, 1] (BCE input/target, bernoulli probabilities)."""
    if t.numel() == 0 or not t.is_floating_point():
        return
    mn, mx = torch.stack([t.min(), t.max()]).tolist()
    if 0 <= mn and mx <= 1:  # NaN fails both comparisons
        return
    bad = ~((t >= 0) & (t <= 1))
    hint = "outside [0, 1]" + (logits_hint if mn < 0 or mx > 1 else " (NaN)")
    _fail(op, arg, t, bad, hint, {"min": _round(mn), "max": _round(mx), **facts})


# -- the checks, one per op family --------------------------------------------------------------------
def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any = None) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _nll(target_at: int, ignore_at: int, self_at: int, op: str) -> Check:
    def check(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        logp, target = args[self_at], args[target_at]
        c = logp.size(0) if logp.dim() == 1 else logp.size(1)
        ignore = _arg(args, kwargs, ignore_at, "ignore_index", -100)
        _range(op, "target", target, 0, c, ignore, num_classes=c, ignore_index=ignore)

    return check


def _dim_index(op: str, index_at: int = 2) -> Check:
    def check(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        src, dim, index = args[0], _arg(args, kwargs, 1, "dim"), _arg(args, kwargs, index_at, "index")
        size = src.size(dim) if src.dim() else 1
        _range(op, "index", index, 0, size, dim=dim, size=size)

    return check


def _embedding(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    weight, ids = args[0], args[1]
    _range("embedding", "indices", ids, 0, weight.size(0), num_embeddings=weight.size(0))


def _advanced_index(op: str) -> Check:
    def check(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        src, indices = args[0], _arg(args, kwargs, 1, "indices")
        dim = 0
        for idx in indices or ():
            if idx is None:
                dim += 1
                continue
            if idx.dtype in (torch.bool, torch.uint8):
                dim += idx.dim()
                continue
            if dim >= src.dim():
                return
            size = src.size(dim)
            _range(op, f"indices[{dim}]", idx, -size, size, dim=dim, size=size)
            dim += 1

    return check


def _multinomial(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    p = args[0]
    if p.numel() == 0 or not p.is_floating_point():
        return
    mn, mx, zero_rows = torch.stack([p.min(), p.max(), (p.sum(-1) <= 0).sum().to(p.dtype)]).tolist()
    if mn >= 0 and mx < float("inf") and zero_rows == 0:
        return
    if not (mn >= 0 and mx < float("inf")):
        _fail(
            "multinomial",
            "input",
            p,
            ~torch.isfinite(p) | (p < 0),
            "not a probability (NaN, inf or < 0)",
            {"min": _round(mn), "max": _round(mx)},
        )
    rows = p.sum(-1) <= 0
    _fail("multinomial", "input", p.sum(-1), rows, "a row summing to <= 0", {"zero_rows": int(zero_rows)})


def _bernoulli(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    p = _arg(args, kwargs, 1, "p") if func.overloadpacket is aten.bernoulli_ else args[0]
    if isinstance(p, torch.Tensor):
        _unit("bernoulli", "p", p)
    elif isinstance(p, float) and not 0 <= p <= 1:
        site, code = _user_site()
        rule = rule_for_op("bernoulli")
        raise KbdebugError(
            f"bernoulli: p={p} outside [0, 1] [{rule}]\n  at {site}: {code}",
            rule=rule,
            facts={"op": "bernoulli", "bad_value": p, "innermost_user_frame": site},
        )


def _bce(self_at: int, target_at: int) -> Check:
    def check(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        _unit("binary_cross_entropy", "input", args[self_at], " (logits? apply sigmoid or use BCEWithLogitsLoss)")
        _unit("binary_cross_entropy", "target", args[target_at])

    return check


def _bincount(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    t = args[0]
    if t.numel() and not t.is_floating_point():
        mn = int(t.min())
        if mn < 0:
            _fail("bincount", "input", t, t < 0, "negative (bincount counts values >= 0)", {"min": mn})


DISPATCH_CHECKS: dict[Any, Check] = {
    aten.nll_loss_forward: _nll(1, 4, 0, "nll_loss"),
    aten.nll_loss2d_forward: _nll(1, 4, 0, "nll_loss2d"),
    aten.nll_loss_backward: _nll(2, 5, 1, "nll_loss_backward"),
    aten.nll_loss2d_backward: _nll(2, 5, 1, "nll_loss2d_backward"),
    aten.gather: _dim_index("gather"),
    aten.scatter: _dim_index("scatter"),
    aten.scatter_: _dim_index("scatter_"),
    aten.scatter_add: _dim_index("scatter_add"),
    aten.scatter_add_: _dim_index("scatter_add_"),
    aten.scatter_reduce: _dim_index("scatter_reduce"),
    aten.scatter_reduce_: _dim_index("scatter_reduce_"),
    aten.index_select: _dim_index("index_select"),
    aten.embedding: _embedding,
    aten.index: _advanced_index("index"),
    aten.index_put: _advanced_index("index_put"),
    aten.index_put_: _advanced_index("index_put_"),
    aten._index_put_impl_: _advanced_index("index_put_"),
    aten.multinomial: _multinomial,
    aten.bernoulli: _bernoulli,
    aten.bernoulli_: _bernoulli,
    aten.binary_cross_entropy: _bce(0, 1),
    aten.binary_cross_entropy_backward: _bce(1, 2),
    aten.bincount: _bincount,
}


class DispatchGuard(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        check = DISPATCH_CHECKS.get(func.overloadpacket)
        if check is None:
            return func(*args, **(kwargs or {}))
        kwargs = kwargs or {}
        check(func, args, kwargs)
        return func(*args, **kwargs)


# Composite ops whose own host checks (or silent wrap-around) happen before any kernel we could see.
def _one_hot(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    t = args[0]
    n = _arg(args, kwargs, 1, "num_classes", -1)
    if n is None or n < 0:
        _range("one_hot", "input", t, 0, 2**62)
    else:
        _range("one_hot", "input", t, 0, n, num_classes=n)


def _take_along_dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    src, idx, dim = args[0], _arg(args, kwargs, 1, "indices"), _arg(args, kwargs, 2, "dim")
    size = src.numel() if dim is None else src.size(dim)
    _range("take_along_dim", "indices", idx, -size, size, dim=dim, size=size)


def _class_target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`cross_entropy` on `[B, C, d...]` scores wants `[B, d...]` class indices: a `[B, 1, d...]` label (a mask
    that kept its channel dim) is refused by torch's host check with a message that names no fix."""
    inp, target = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "target")
    if not (isinstance(inp, torch.Tensor) and isinstance(target, torch.Tensor)) or target.is_floating_point():
        return
    if inp.dim() >= 3 and target.dim() == inp.dim() and target.size(1) == 1 and inp.size(1) > 1:
        site, code = _user_site()
        rule = rule_for_op("cross_entropy")
        hint = "drop the channel dim: target.squeeze(1).long()"
        facts = {
            "op": "cross_entropy",
            "argument": "target",
            "target_shape": list(target.shape),
            "input_shape": list(inp.shape),
            "shape_relation": "rank",
            "got_dims": target.dim(),
            "expected_dims": inp.dim() - 1,
            "innermost_user_frame": site,
            "fix_hint": hint,
        }
        if code:
            facts["user_code"] = code
        msg = (
            f"cross_entropy: target has shape {list(target.shape)} against input {list(inp.shape)}: class indices "
            f"take no channel dim [{rule}]\n  at {site}" + (f": {code}" if code else "") + f"\n  fix: {hint}"
        )
        raise KbdebugError(msg, rule=rule, facts=facts)


def _wrap(fn: Callable[..., Any], check: Callable[[tuple[Any, ...], dict[str, Any]], None]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        check(args, kwargs)
        return fn(*args, **kwargs)

    guarded.__wrapped__ = fn  # type: ignore[attr-defined]
    guarded.__name__ = getattr(fn, "__name__", "guarded")
    guarded.__doc__ = getattr(fn, "__doc__", None)
    return guarded


# (owner, attribute, check). A TorchFunctionMode would see these too, but it costs a Python call
# on every torch function of the step; wrapping two attributes for the guard's lifetime costs nothing.
FUNCTION_CHECKS: list[tuple[Any, str, Callable[[tuple[Any, ...], dict[str, Any]], None]]] = [
    (torch.nn.functional, "one_hot", _one_hot),
    (torch.nn.functional, "cross_entropy", _class_target),
    (torch, "take_along_dim", _take_along_dim),
    (torch.Tensor, "take_along_dim", _take_along_dim),
]
_patch_lock = threading.Lock()
_patch_depth = 0
_originals: list[tuple[Any, str, Any]] = []


def _patch() -> None:
    global _patch_depth
    with _patch_lock:
        if _patch_depth == 0:
            for owner, name, check in FUNCTION_CHECKS:
                orig = getattr(owner, name)
                _originals.append((owner, name, orig))
                setattr(owner, name, _wrap(orig, check))
        _patch_depth += 1


def _unpatch() -> None:
    global _patch_depth
    with _patch_lock:
        _patch_depth -= 1
        if _patch_depth == 0:
            while _originals:
                owner, name, orig = _originals.pop()
                setattr(owner, name, orig)


@contextmanager
def guard() -> Iterator[None]:
    """Inside `with kbdebug.guard():` a bad index, target or probability raises `KbdebugError`
    at the calling line, naming the op, the argument, the value, its position and the rule."""
    _patch()
    try:
        with DispatchGuard():
            yield
    except KbdebugError as exc:
        _trim(exc.__traceback__)  # the traceback ends at the op the user called, not in kbdebug's checks
        raise
    finally:
        _unpatch()


def _trim(tb: TracebackType | None) -> None:
    """Cut the traceback's tail of kbdebug frames (in place: contextlib re-raises this very traceback)."""
    from kbdebug.core.frames import _PKG_DIR

    prev: TracebackType | None = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_PKG_DIR) and prev is not None:
            prev.tb_next = None
            return
        prev, tb = tb, tb.tb_next
