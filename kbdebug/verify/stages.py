"""Stage-by-stage verification: `audit(model)` records every module's inputs and outputs, and
names the module that failed; `describe(x)` is the one-line `tensor_debug` print."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import torch
from pydantic import BaseModel, Field

from kbdebug.core.values import dtype_name


class TensorStats(BaseModel):
    shape: list[int]
    dtype: str
    device: str
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    nan: int = 0
    inf: int = 0

    def __str__(self) -> str:
        s = f"[{', '.join(map(str, self.shape))}] {self.dtype} {self.device}"
        if self.min is not None:
            s += f" min={_fmt(self.min)} max={_fmt(self.max)}"
        if self.mean is not None:
            s += f" mean={_fmt(self.mean)}"
        if self.nan or self.inf:
            s += f" nan={self.nan} inf={self.inf}"
        return s


def _fmt(x: float | None) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.4g}"


def stats(t: torch.Tensor, values: bool = True) -> TensorStats:
    """Shape/dtype/device always; min/max/mean/nan/inf with one read-back when `values`."""
    st = TensorStats(shape=list(t.shape), dtype=dtype_name(t.dtype), device=str(t.device))
    if not values or t.numel() == 0 or t.is_complex() or t.is_meta or t.layout != torch.strided:
        return st
    x = t.detach()
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    if x.is_floating_point():
        mn, mx = torch.aminmax(x)
        row = torch.stack([mn.float(), mx.float(), x.float().mean()]).tolist()
        if all(v == v and abs(v) != float("inf") for v in row):  # finite min/max: no NaN/inf anywhere
            st.min, st.max, st.mean = row
            return st
        finite = torch.isfinite(x)
        xf = x.float()
        n_fin = finite.sum()
        mn = torch.where(finite, xf, torch.full((), float("inf"), device=x.device)).min()
        mx = torch.where(finite, xf, torch.full((), float("-inf"), device=x.device)).max()
        mean = torch.where(finite, xf, torch.zeros((), device=x.device)).sum() / n_fin.clamp(min=1)
        row = torch.stack([mn, mx, mean, x.isnan().sum().float(), x.isinf().sum().float(), n_fin.float()]).tolist()
        if row[5] > 0:
            st.min, st.max, st.mean = row[0], row[1], row[2]
        st.nan, st.inf = int(row[3]), int(row[4])
    else:
        mn, mx = torch.aminmax(x)
        row = torch.stack([mn.double(), mx.double(), x.double().mean()]).tolist()
        st.min, st.max, st.mean = row
    return st


def describe(x: Any, name: str | None = None) -> str:
    """One line per tensor: shape, dtype, device, min, max, mean, nan/inf. Returns the text and prints nothing,
    so `print(describe(x))` prints it once; `print_describe(x)` is the helper that prints."""
    if name is None:  # the caller's own variable name, as tensor_debug prints it
        name = _caller_name(x, sys._getframe(1))
    lines = [f"{path}: {stats(t)}" for path, t in walk_tensors(x, name or "tensor")]
    if not lines:
        lines.append(f"{name or 'value'}: {type(x).__name__} (no tensors)")
    return "\n".join(lines)


def print_describe(x: Any, name: str | None = None, *, file: Any = None) -> str:
    """Print `describe(x)` (to stdout or `file`) and return it: the explicit printing helper."""
    text = describe(x, name if name is not None else (_caller_name(x, sys._getframe(1)) or ""))
    print(text, file=file or sys.stdout)
    return text


def _caller_name(x: Any, frame: Any) -> str | None:
    return next((k for k, v in frame.f_locals.items() if v is x and k.isidentifier() and not k.startswith("_")), None)


def walk_tensors(obj: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside nested lists, tuples, dicts, dataclasses and named tuples, with its path."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk_tensors(v, f"{path}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk_tensors(v, f"{path}[{i}]")
    elif hasattr(obj, "__dataclass_fields__") or hasattr(obj, "_fields"):
        for k in getattr(obj, "_fields", None) or obj.__dataclass_fields__:
            yield from walk_tensors(getattr(obj, k), f"{path}.{k}")


class StageRecord(BaseModel):
    index: int
    module: str
    type: str
    inputs: list[TensorStats] = Field(default_factory=list)
    outputs: list[TensorStats] = Field(default_factory=list)
    finished: bool = False
    finish_order: int | None = None
    error: str | None = None
    # When its forward started and ended on one clock for all modules, and which module's forward called it:
    # the NaN/inf's origin is read off that order (see Audit.nonfinite_origin).
    started_at: int = 0
    finished_at: int | None = None
    parent: int | None = None
    # where its class's forward is written, `model.py:12`, to name the function that made a value
    forward_at: str | None = None

    @property
    def nonfinite(self) -> bool:
        return any(s.nan or s.inf for s in self.outputs)

    @property
    def nonfinite_input(self) -> bool:
        return any(s.nan or s.inf for s in self.inputs)

    @property
    def label(self) -> str:
        return f"{self.module} ({self.type})"


class Origin(BaseModel):
    """Where a NaN/inf first appeared: the output of a module whose inputs were finite (`by` that module),
    or between modules, in the code of the forward that called the next one (`in_forward_of`, before
    `before`), or already in the model's inputs (`in_inputs`)."""

    by: StageRecord | None = None
    in_forward_of: StageRecord | None = None
    before: StageRecord | None = None
    in_inputs: bool = False

    def __str__(self) -> str:
        if self.by is not None:
            return f"first NaN/inf made by module {self.by.label}: its inputs were finite, its output is not"
        if self.in_forward_of is not None and self.before is not None:
            caller, callee = self.in_forward_of, self.before
            where = f" ({caller.forward_at})" if caller.forward_at else ""
            return (
                f"first NaN/inf made in {caller.type}.forward{where} before it called {callee.label}: "
                f"{callee.module}'s input already held NaN/inf (it only passed it on); look at the ops before it"
            )
        return "first NaN/inf already in the model's input: it came from the data or the code before the model"


class Audit:
    """Forward hooks on every submodule; use `with kbdebug.audit(model) as a:` or `.remove()`.

    With `sync=True` each module waits for its kernels (`torch.cuda.synchronize`), so an
    asynchronous kernel failure is reported by the module that launched it. `values=False`
    records only shapes/dtypes/devices (no reductions, no syncs).
    """

    def __init__(
        self, model: torch.nn.Module, *, sync: bool = False, values: bool = True, leaves_only: bool = False, max_records: int = 10_000
    ) -> None:
        self.model, self.sync, self.values, self.max_records = model, sync, values, max_records
        self.records: list[StageRecord] = []
        self._stack: list[StageRecord] = []
        self._handles: list[Any] = []
        self.failed: StageRecord | None = None
        self._finished = 0
        self._clock = 0
        for name, mod in model.named_modules():
            if leaves_only and any(True for _ in mod.children()):
                continue
            label = name or type(model).__name__
            self._handles.append(mod.register_forward_pre_hook(self._pre(label)))
            self._handles.append(mod.register_forward_hook(self._post(), always_call=True))

    def _pre(self, name: str) -> Any:
        def hook(mod: torch.nn.Module, args: tuple[Any, ...]) -> None:
            rec = StageRecord(
                index=len(self.records),
                module=name,
                type=type(mod).__name__,
                inputs=[stats(t, self.values) for _, t in walk_tensors(args, "in")],
                started_at=self._tick(),
                parent=self._stack[-1].index if self._stack else None,
                forward_at=_forward_at(mod),
            )
            self._stack.append(rec)
            if len(self.records) < self.max_records:
                self.records.append(rec)

        return hook

    def _post(self) -> Any:
        def hook(mod: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
            rec = self._stack.pop() if self._stack else None
            if rec is None:
                return
            if sys.exc_info()[0] is not None and output is None:  # always_call after a raise
                self._mark_failed(rec, sys.exc_info()[1])
                return
            if self.sync and torch.cuda.is_available() and torch.cuda.is_initialized():
                try:
                    torch.cuda.synchronize()
                except RuntimeError as err:
                    self._mark_failed(rec, err)
                    raise
            rec.outputs = [stats(t, self.values) for _, t in walk_tensors(output, "out")]
            rec.finished = True
            rec.finished_at = self._tick()
            rec.finish_order = self._finished
            self._finished += 1

        return hook

    def _mark_failed(self, rec: StageRecord, err: BaseException | None) -> None:
        rec.error = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}" if err else "failed"
        if self.failed is None:  # the innermost module fails first; outer ones only propagate
            self.failed = rec

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    @property
    def nonfinite_origin(self) -> Origin | None:
        """Where a NaN/inf first appeared, read off the modules' inputs and outputs in the order they happened:
        the first non-finite value seen as an output was made by that module (its inputs were finite, or an
        input would have been seen first); one first seen as an input was made between modules, by the code of
        the forward that called it (`torch.log(x)` before `self.fc(x)`: fc only passed it on)."""
        events = [(r.started_at, r, "in") for r in self.records if r.nonfinite_input]
        events += [(r.finished_at or 0, r, "out") for r in self.records if r.finished and r.nonfinite]
        if not events:
            return None
        _, rec, side = min(events, key=lambda e: e[0])
        if side == "out":
            return Origin(by=rec)
        if rec.parent is None:
            return Origin(in_inputs=True)
        return Origin(in_forward_of=self.records[rec.parent], before=rec)

    @property
    def first_nonfinite(self) -> StageRecord | None:
        """The module whose forward first made a NaN/inf (itself, or code in its forward between its children)."""
        origin = self.nonfinite_origin
        return None if origin is None else origin.by or origin.in_forward_of

    def report(self) -> str:
        rows = []
        for r in self.records:
            mark = "FAILED " if r is self.failed else ("NaN/inf" if r.nonfinite else "")
            ins = "; ".join(map(str, r.inputs)) or "-"
            outs = "; ".join(map(str, r.outputs)) or ("-" if r.finished else "(did not finish)")
            rows.append(f"{r.index:>4} {mark:<7} {r.module} ({r.type})\n         in:  {ins}\n         out: {outs}")
        if self.failed is not None:
            f = self.failed
            rows.append(f"first failing module: {f.module} ({f.type}): {f.error}; inputs {'; '.join(map(str, f.inputs))}")
        elif (origin := self.nonfinite_origin) is not None:
            rows.append(str(origin))
        return "\n".join(rows)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __enter__(self) -> Audit:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.remove()
        if ev is not None and self.failed is not None and hasattr(ev, "add_note"):
            f = self.failed
            ev.add_note(f"kbdebug.audit: failed in module {f.module!r} ({f.type}) with inputs " + ("; ".join(map(str, f.inputs)) or "none"))


def _forward_at(mod: torch.nn.Module) -> str | None:
    """`file.py:LINE` of the module class's own forward (None for torch's built-in modules' C-less forwards)."""
    code = getattr(type(mod).forward, "__code__", None)
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}" if code is not None else None


def audit(model: torch.nn.Module, *, sync: bool = False, values: bool = True, leaves_only: bool = False) -> Audit:
    """Record input/output shape, dtype, device, min/max, nan/inf per module and name the first
    module that failed: the stage-by-stage audit and bisection, done for you."""
    return Audit(model, sync=sync, values=values, leaves_only=leaves_only)
