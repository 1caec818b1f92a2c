"""Library entry points. Nothing here imports torch: a log is diagnosed from its text alone, and a
live exception from its type, message, chain and real frames."""

from __future__ import annotations

import linecache
import os
import re
import shlex
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from kbdebug.diagnoser import pipeline
from kbdebug.diagnoser.context import launch_command
from kbdebug.diagnosis import Diagnosis
from kbdebug.frames import user_frame
from kbdebug.kb import load_kb
from kbdebug.normalise import Region, iter_lines
from kbdebug.parse import parse_regions
from kbdebug.parse.needles import needles
from kbdebug.records import Record
from kbdebug.scan import Scanner, scan_path, scan_text
from kbdebug.values import dtype_name, plain_number


def diagnose_regions(
    regions: list[Region],
    source: str = "-",
    kb_dirs: list[Path] | None = None,
    *,
    origin: str = "log",
    facts: dict[str, Any] | None = None,
    extra_records: Sequence[Record] = (),
) -> Diagnosis:
    """`origin` says where the text came from ("log", "run", "rerun"; see kbdebug.diagnoser.context), `facts`
    adds what the caller knows (the command's `script`); both decide which commands are offered.
    `extra_records` are what the caller observed beside the text, read by the rules like the log's own
    (`kbdebug run` adds a ProcessExit for the signal that killed the child: a segfault prints nothing);
    their `first_line` places them in the log's order."""
    lines = ((ln.no, ln.text) for ln in iter_lines(regions))
    records = [*parse_regions(regions), *extra_records]
    return pipeline.diagnose(records, load_kb(kb_dirs), source, lines, origin=origin, facts=facts)


def diagnose_text(text: str, *, source: str = "-", kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a log held in memory."""
    return diagnose_regions(scan_text(text, needles), source, kb_dirs)


def explain(path: str | Path, *, kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a log file of any size; it is streamed, never read whole."""
    return diagnose_regions(scan_path(path, needles), str(path), kb_dirs)


def diagnose(exc: BaseException, *, log: str | os.PathLike[str] | None = None, kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a live exception.

    `log` is extra output to read with it: text, or a path to a log file. Inside
    `kbdebug.capture()` what fd 2 received (the GPU's assertion lines) is read as well. Facts
    about where it happened come from the traceback's frames, not from its printed text.
    """
    guarded = _guard_diagnosis(exc, kb_dirs)
    if guarded is not None:
        return guarded
    from kbdebug.fdtee import active_text

    parts: list[str] = []
    if isinstance(log, os.PathLike):
        parts.append(Path(log).read_text(encoding="utf-8", errors="replace"))
    elif isinstance(log, str):
        parts.append(log)
    captured = active_text()
    if captured:
        parts.append(captured)
    parts.append("".join(traceback.format_exception(exc)))
    kb = load_kb(kb_dirs)
    regions = scan_text("\n".join(parts), needles)
    records = parse_regions(regions)
    _add_frame_shapes(records, exc)
    lines = ((ln.no, ln.text) for ln in iter_lines(regions))
    live = lambda diag: _facts_from_frames(diag, exc)  # noqa: E731
    return pipeline.diagnose(records, kb, f"<{_type_name(type(exc))}>", lines, origin="script", facts=_live_facts(), live=live)


def _guard_diagnosis(exc: BaseException, kb_dirs: list[Path] | None) -> Diagnosis | None:
    """A KbdebugError from `guard()` already knows its rule and facts."""
    for e in _chain(exc):
        rule = getattr(e, "kbdebug_rule", None)
        if rule:
            from kbdebug.diagnosis import Incident

            facts = dict(getattr(e, "kbdebug_facts", {}) or {})
            cpu = _cpu_only_run()
            if cpu:  # guard() checked the arguments on the CPU: no kernel ran, nothing to rerun blocking
                facts.setdefault("device", "cpu")
            inc = Incident(rule=rule, title=rule, confidence=0.99, facts=facts, device_evidence=not cpu)
            kb = load_kb(kb_dirs)
            r = kb.get(rule)
            if r is not None:
                inc.title, inc.checks = r.title, list(r.checks)
            diag = Diagnosis(source=f"<{_type_name(type(e))}>", incidents=[inc])
            _facts_from_frames(diag, e)
            return pipeline.complete(diag, kb, "script", _live_facts())
    return None


def _live_facts() -> dict[str, Any]:
    """The running script and the command that reran it as it ran (kbdebug.diagnoser.context.launch_command), for the
    commands that rerun it (a notebook is recognised by its frames)."""
    main = sys.argv[0] if sys.argv else ""
    test = os.environ.get("PYTEST_CURRENT_TEST", "")
    if test and "_pytest" in sys.modules:  # `tests/test_x.py::test_y (call)`: the test, not pytest's __main__.py
        node = test.rsplit(" (", 1)[0]
        return {"script": node, "launch": f"python -m pytest {shlex.quote(node)}"}
    if not (main.endswith(".py") and "ipykernel" not in main and os.path.isfile(main)):
        return {}
    return {"script": main, "launch": launch_command(sys.argv, dict(os.environ), _parent_argv())}


def _parent_argv() -> list[str]:
    """The parent process's command line (Linux): under torchrun, the launcher that started this worker."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _cpu_only_run() -> bool:
    """True when torch is loaded and this process never initialised CUDA: nothing ran on a GPU, so no command
    that needs CUDA (CUDA_LAUNCH_BLOCKING=1) can help. Read from the loaded module: api never imports torch."""
    torch = sys.modules.get("torch")
    try:
        return torch is not None and not torch.cuda.is_initialized()
    except (AttributeError, RuntimeError):
        return False


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts, outermost first, without cycles."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen):
        seen.append(cur)
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return seen


def _type_name(cls: type) -> str:
    mod = cls.__module__
    return cls.__qualname__ if mod in ("builtins", "__main__") else f"{mod}.{cls.__qualname__}"


def _frame_line(tb: TracebackType | None, frame: FrameType) -> int:
    while tb is not None:
        if tb.tb_frame is frame:
            return tb.tb_lineno
        tb = tb.tb_next
    return frame.f_lineno


def _facts_from_frames(diag: Diagnosis, exc: BaseException) -> None:
    chain = _chain(exc)
    for inc in diag.incidents:
        msg = str(inc.facts.get("error_message") or "")
        source = next((e for e in chain if msg and str(e).strip().startswith(msg.strip()[:60])), exc)
        inc.facts["error_type"] = _type_name(type(source))
        text = str(source).strip()
        if text:
            inc.facts["error_message"] = text.splitlines()[0].strip()
        frame = user_frame(source.__traceback__)
        if frame is None:
            frame = next((f for e in chain if (f := user_frame(e.__traceback__)) is not None), None)
            source = next((e for e in chain if user_frame(e.__traceback__) is frame), source)
        if frame is None:
            continue
        line = _frame_line(source.__traceback__, frame)
        inc.facts["innermost_user_frame"] = f"{frame.f_code.co_filename}:{line}"
        inc.facts["user_function"] = frame.f_code.co_name
        code = linecache.getline(frame.f_code.co_filename, line, frame.f_globals).strip()
        if code:
            inc.facts["user_code"] = code
        tensors = _frame_tensors(frame, code)
        if tensors:
            inc.facts["frame_tensors"] = tensors
        diag.keep_inputs(_frame_inputs(frame, code))


# How code names a label/target tensor (`label`, `target`, `gt_mask`, `y_true`, `masks`); the other operand is the prediction.
LABEL_NAME = re.compile(r"(?i)label|target|\bgts?\b|^gt_|_gt\b|ground_?truth|mask|^y(?:_?true)?$|annotation|seg_?map")


def _add_frame_shapes(records: list[Any], exc: BaseException) -> None:
    """The shapes of the tensors on the failing line join the exception's record before the rules see
    it: a broadcast message names one dim, the tensors say which relation (label vs logits) clashed."""
    from kbdebug.records import PyException

    found = next(((e, f) for e in _chain(exc) if (f := user_frame(e.__traceback__)) is not None), None)
    last = next((r for r in reversed(records) if isinstance(r, PyException) and r.exc_type), None)
    if found is None or last is None:
        return
    source, frame = found
    line = _frame_line(source.__traceback__, frame)
    code = linecache.getline(frame.f_code.co_filename, line, frame.f_globals).strip()
    tensors = _frame_tensors(frame, code, values=False)
    last.frame_shapes = [t["shape"] for t in tensors.values()]
    labels = [name for name in tensors if LABEL_NAME.search(name)]
    others = [name for name in tensors if name not in labels and len(tensors[name]["shape"]) >= 2]
    if len(labels) == 1 and len(others) == 1:  # which of the two is the label, by its name in the user's code
        last.frame_target_shape, last.frame_input_shape = tensors[labels[0]]["shape"], tensors[others[0]]["shape"]


def _frame_tensors(frame: FrameType, code: str, values: bool = True) -> dict[str, dict[str, Any]]:
    """Shape, dtype and device of the tensors named on the failing line (metadata only: no kernel
    runs, so this is safe after a device-side assert has poisoned the CUDA context)."""
    torch = sys.modules.get("torch")
    if torch is None or not code:
        return {}
    import re

    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", code)):
        val = frame.f_locals.get(name)
        if isinstance(val, torch.Tensor):
            info: dict[str, Any] = {"shape": list(val.shape), "dtype": dtype_name(val.dtype), "device": str(val.device)}
            if values and val.device.type == "cpu" and 0 < val.numel() <= 10_000_000 and not val.is_complex():
                try:
                    info["min"], info["max"] = plain_number(val.min().item()), plain_number(val.max().item())
                except (RuntimeError, TypeError):
                    pass
            out[name] = info
        if len(out) >= 8:
            break
    return out


def _frame_inputs(frame: FrameType, code: str) -> dict[str, Any]:
    """The tensors named on the failing line and its literal keyword settings (`num_classes=5`,
    `ignore_index=255`), kept so `diag.verify()` can run its checks without being handed them again."""
    import re

    from kbdebug.diagnoser.context import call_settings

    torch = sys.modules.get("torch")
    out: dict[str, Any] = {}
    if torch is not None:
        for name in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", code)):
            val = frame.f_locals.get(name)
            if isinstance(val, (torch.Tensor, torch.nn.Module)):
                out[name] = val
    for key, val in call_settings(code).items():
        out.setdefault(key, val)
    return out


__all__ = ["Diagnosis", "Scanner", "diagnose", "diagnose_regions", "diagnose_text", "explain", "user_frame"]
