"""A live exception read from the exception objects themselves, the way rich's traceback extracts them.

The type, the message, the chain (`__cause__` / `__context__`) and the frames come from the objects, not
from their printed text: only each exception's message is parsed (for the message templates, CUDA and
OOM figures it holds), read in the context of its own frames. Every record built here knows the
exception it stands for, so the facts of an incident come from that exception's frames and locals:
nothing is found again by its text. The printed traceback is kept only as the evidence lines a report
shows, numbered after the extra log text read with it.
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
import shlex
import sys
import traceback
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

from kbdebug import _regex_cache
from kbdebug.core.facts import Facts, InplaceWrite, ModuleCounts, TensorInfo
from kbdebug.core.frames import location, user_frame
from kbdebug.core.quoting import quoted_message
from kbdebug.core.values import dtype_name, plain_number
from kbdebug.diagnoser.context import LABEL_NAME, call_settings, launch_command
from kbdebug.diagnosis import LiveEvidence, LiveSite
from kbdebug.normalise import Line
from kbdebug.parse.regions import parse_lines
from kbdebug.records import Frame, PyException, Record
from kbdebug.runtime.plain_errors import live_facts

_CAUSE = ["", "The above exception was the direct cause of the following exception:", ""]
_CONTEXT = ["", "During handling of the above exception, another exception occurred:", ""]
MAX_TENSORS = 8  # tensors of the failing line described, at most


@dataclass
class LiveException:
    """The records of a live exception chain, the lines Python prints for it, and what each of its exceptions
    says beyond its text (`evidence`): read once, then handed down as plain data."""

    records: list[Record] = field(default_factory=list)
    lines: list[tuple[int, str]] = field(default_factory=list)
    evidence: LiveEvidence = field(default_factory=LiveEvidence)


def chain_of(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts, outermost first, without cycles."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen):
        seen.append(cur)
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return seen


def safe_str(obj: object) -> str:
    """`str(obj)`, or what Python's traceback prints when that raises (an exception's own `__str__` may)."""
    try:
        return str(obj)
    except Exception:
        return "<exception str() failed>"


def type_name(cls: type) -> str:
    """The exception type as a traceback prints it (`RuntimeError`, `torch.OutOfMemoryError`)."""
    mod = getattr(cls, "__module__", None)
    return cls.__qualname__ if mod in ("builtins", "__main__") else f"{mod}.{cls.__qualname__}"


def read_exception(exc: BaseException, first_line: int = 1) -> LiveException:
    """The chain's records, innermost first as Python prints them, numbered from `first_line`."""
    live = LiveException()
    printed: list[str] = []
    outermost = chain_of(exc)
    chain = list(reversed(outermost))
    found = {id(e): _site(e) for e in chain}  # each exception's own user frame, read once
    fallback = next((own for e in outermost if (own := found[id(e)]) is not None), None)
    for i, e in enumerate(chain):
        relation = None
        if i:
            relation = "cause" if e.__cause__ is chain[i - 1] else "context"
            printed += _CAUSE if relation == "cause" else _CONTEXT
        start = first_line + len(printed)
        block = _bounded("".join(traceback.format_exception(e, chain=False)).splitlines(), 4 * MAX_MESSAGE_LINES)
        only = _bounded("".join(traceback.format_exception_only(e)).splitlines()) or [type_name(type(e))]
        printed += block
        end = first_line + len(printed) - 1
        summary = traceback.extract_tb(e.__traceback__)
        frames = [Frame(file=f.filename, line=f.lineno, function=f.name, code=f.line or None) for f in summary]
        name = type_name(type(e))
        first, *more = only
        message = "\n".join([first.removeprefix(name).removeprefix(":").strip(), *more]).strip()
        rec = PyException(
            first_line=start,
            last_line=end,
            raw="\n".join(block),
            exc_type=name,
            message=message,
            frames=frames,
            chained=relation,  # type: ignore[arg-type]
            has_header=bool(frames),
        )
        msg_lines = [Line(end - len(only) + 1 + k, text) for k, text in enumerate(only)]
        parsed = parse_lines(msg_lines, frames)
        said = [r for r in parsed if not isinstance(r, PyException)]
        # the message's own reading (the template the parse read off it, which says what its shapes are)
        rec.template = next((r.template for r in parsed if isinstance(r, PyException) and r.template), None)
        shape = next((said_shape for r in said if (said_shape := r.facts().get("tensor_shape")) is not None), None)
        site = read_site(e, found[id(e)] or fallback, shape)
        if found[id(e)] is not None:  # its own failing line, not one borrowed from the chain
            _add_frame_shapes(rec, site)
        live.records += said
        live.records.append(rec)
        live.evidence.sites[id(rec)] = site
    live.lines = [(first_line + k, text) for k, text in enumerate(printed)]
    live.evidence.outer = live.evidence.sites[id(live.records[-1])] if chain else LiveSite()
    return live


def _notebook_cell(filename: str) -> int | None:
    """The cell number IPython gave the temporary file a cell ran from (ipykernel's `/tmp/ipykernel_1/2.py`),
    as its own tracebacks say `Cell In[3]`; None outside IPython."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None)
    number = mapping.get(filename) if isinstance(mapping, dict) else None
    return number if isinstance(number, int) else None


MAX_MESSAGE_LINES, MAX_LINE = 400, 16_384  # of an exception's message read: a tensor printed whole is not evidence


def _bounded(lines: list[str], most: int = MAX_MESSAGE_LINES) -> list[str]:
    """At most `most` of the lines (head and tail kept), each at most MAX_LINE characters."""
    if len(lines) > most:
        half = most // 2
        lines = [*lines[:half], "...", *lines[-half:]]
    return [t if len(t) <= MAX_LINE else t[: MAX_LINE - 1] + "…" for t in lines]


def read_site(exc: BaseException, found: tuple[FrameType, int, str] | None, saved_shape: list[int] | None = None) -> LiveSite:
    """The live facts of one exception: the error as raised, the user's innermost frame (`found`: its own, else
    the chain's), its source line, its tensors and modules; `saved_shape`, the shape of a tensor saved for
    backward that was written in place (its message says), asks where in that function it was written."""
    facts: Facts = {"error_type": type_name(type(exc))}
    said = safe_str(exc)
    text = said.strip()
    if text:
        facts["error_message"] = _bounded([quoted_message(said)])[0]
    if found is None:
        return LiveSite(facts)
    frame, line, code = found
    facts["innermost_user_frame"] = location(frame.f_code.co_filename, line, _notebook_cell(frame.f_code.co_filename))
    facts["user_function"] = frame.f_code.co_name
    if code:
        facts["user_code"] = code
    for key, val in live_facts(type_name(type(exc)), text, frame, line, code).items():  # a plain Python error's values
        facts.setdefault(key, val)  # type: ignore[misc]  # declared facts (kbdebug.core.facts)
    tensors = frame_tensors(frame, code)
    if tensors:
        facts["frame_tensors"] = tensors
    modules = _frame_modules(frame)
    if modules:
        facts["frame_modules"] = modules
    if saved_shape is not None:  # a tensor saved for backward was written in place: where, in this function
        writes = _inplace_writes(frame, line, saved_shape)
        if writes:
            facts["inplace_candidates"] = writes
        layers = _inplace_layers(frame)
        if layers:
            facts["inplace_layers"] = layers
    return LiveSite(facts, frame_inputs(frame, code))


def running_script() -> Facts:
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


def cpu_only_run() -> bool:
    """True when torch is loaded and this process never initialised CUDA: nothing ran on a GPU, so no command
    that needs CUDA (CUDA_LAUNCH_BLOCKING=1) can help. Read from the loaded module: kbdebug never imports torch here."""
    torch = sys.modules.get("torch")
    try:
        return torch is not None and not torch.cuda.is_initialized()
    except (AttributeError, RuntimeError):
        return False


def user_site(exc: BaseException) -> tuple[FrameType, int, str] | None:
    """The user's innermost frame for `exc`: in its own traceback, else in its chain's (outermost first)."""
    return next((site for e in chain_of(exc) if (site := _site(e)) is not None), None)


def _site(exc: BaseException) -> tuple[FrameType, int, str] | None:
    """The user's innermost frame in `exc`'s own traceback, the line it failed on there, and that line's code."""
    frame = user_frame(exc.__traceback__)
    if frame is None:
        return None
    line = _frame_line(exc.__traceback__, frame)
    return frame, line, linecache.getline(frame.f_code.co_filename, line, frame.f_globals).strip()


def _frame_line(tb: TracebackType | None, frame: FrameType) -> int:
    while tb is not None:
        if tb.tb_frame is frame:
            return tb.tb_lineno
        tb = tb.tb_next
    return frame.f_lineno


def _add_frame_shapes(rec: PyException, site: LiveSite) -> None:
    """The shapes of the tensors on the exception's failing line join its record before the rules see it:
    a broadcast message names one dim, the tensors say which relation (label vs logits) clashed."""
    tensors = site.facts.get("frame_tensors") or {}
    rec.frame_shapes = [t["shape"] for t in tensors.values()]
    labels = [name for name in tensors if LABEL_NAME.search(name)]
    others = [name for name in tensors if name not in labels and len(tensors[name]["shape"]) >= 2]
    if len(labels) == 1 and len(others) == 1:  # which of the two is the label, by its name in the user's code
        rec.frame_target_shape, rec.frame_input_shape = tensors[labels[0]]["shape"], tensors[others[0]]["shape"]


# In-place writes as code spells them: `h.relu_()`, `x += y`, `x[mask] = v` (the written name first).
_INPLACE = _regex_cache.compile(
    r"^\s*(?:([A-Za-z_][\w.]*)\.(?!_)\w+_\(|([A-Za-z_][\w.]*)\s*(?:[-+*/@%&|^]|//|\*\*)=|([A-Za-z_][\w.]*)\[[^\]]*\]\s*=[^=])"
)


def _lookup(frame: FrameType, name: str) -> Any:
    """A name as the failing line sees it: a local, else a module global (`x` used inside a function or
    lambda), following attributes (`self.embed`)."""
    head, *rest = name.split(".")
    val = frame.f_locals[head] if head in frame.f_locals else frame.f_globals.get(head)
    for attr in rest:
        try:  # a user's `__getattr__` may raise anything (an nn.Module wrapper's recursing one: RecursionError)
            val = getattr(val, attr, None)
        except Exception:
            return None
    return val


def _inplace_writes(frame: FrameType, line: int, shape: list[int]) -> list[InplaceWrite]:
    """The lines of the failing function, before the failing line, that write in place to a tensor of `shape`:
    where the tensor that backward found modified was most likely changed."""
    torch = sys.modules.get("torch")
    try:
        lines, start = inspect.getsourcelines(frame.f_code)
    except (OSError, TypeError):
        return []
    out: list[InplaceWrite] = []
    for no, text in enumerate(lines, start):
        m = _INPLACE.match(text) if no < line else None
        name = next((g for g in m.groups() if g), None) if m else None
        val = _lookup(frame, name) if name else None
        if torch is not None and isinstance(val, torch.Tensor) and list(val.shape) == shape:
            out.append({"code": text.strip(), "line": no})
    return out[:3]


def _frame_modules(frame: FrameType) -> dict[str, ModuleCounts]:
    """The modules the failing function holds, with how many of their parameters train: whether a graph
    could reach a parameter at all (`requires_grad=False` everywhere) or was cut on the way."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    out: dict[str, ModuleCounts] = {}
    for name, val in list(frame.f_locals.items()):
        if isinstance(val, torch.nn.Module) and len(out) < 4:
            try:  # a half-built module (its wrapper's `__getattr__` recursing) is no evidence
                params = list(val.parameters())
            except Exception:
                continue
            out[name] = {"parameters": len(params), "trainable": sum(1 for p in params if p.requires_grad)}
    return out


def _inplace_layers(frame: FrameType) -> list[str]:
    """Layers built with `inplace=True` in the modules the failing function holds (`model.block.act (ReLU)`):
    each overwrites its input, which the layer before may have saved for backward."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    out: list[str] = []
    for name, val in list(frame.f_locals.items()):
        if isinstance(val, torch.nn.Module):
            try:
                named = list(val.named_modules())
            except Exception:  # as in _frame_modules
                continue
            for sub, mod in named:
                if getattr(mod, "inplace", False) is True and len(out) < 5:
                    out.append(f"{name}.{sub} ({type(mod).__name__})" if sub else f"{name} ({type(mod).__name__})")
    return out


def frame_tensors(frame: FrameType, code: str) -> dict[str, TensorInfo]:
    """Shape, dtype and device of the tensors named on the failing line (metadata only: no kernel
    runs, so this is safe after a device-side assert has poisoned the CUDA context)."""
    torch = sys.modules.get("torch")
    if torch is None or not code:
        return {}
    out: dict[str, TensorInfo] = {}
    for name in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", code)):
        val = _lookup(frame, name)
        if isinstance(val, torch.Tensor):
            info: TensorInfo = {"shape": list(val.shape), "dtype": dtype_name(val.dtype), "device": str(val.device)}
            if val.device.type == "cpu" and 0 < val.numel() <= 10_000_000 and not val.is_complex():
                try:
                    info["min"], info["max"] = plain_number(val.min().item()), plain_number(val.max().item())
                except (RuntimeError, TypeError):
                    pass
            out[name] = info
        if len(out) >= MAX_TENSORS:
            break
    return out


def frame_inputs(frame: FrameType, code: str) -> dict[str, Any]:
    """The tensors named on the failing line and its literal keyword settings (`num_classes=5`,
    `ignore_index=255`), kept so `diag.verify()` can run its checks without being handed them again."""
    torch = sys.modules.get("torch")
    out: dict[str, Any] = {}
    if torch is not None:
        for name in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", code)):
            for part in _prefixes(name):  # `self.embed(input_ids)`: `self`, and `self.embed` as `embed`
                val = _lookup(frame, part)
                if isinstance(val, (torch.Tensor, torch.nn.Module)):
                    out.setdefault(part.rsplit(".", 1)[-1], val)
    for key, val in call_settings(code).items():
        out.setdefault(key, val)
    return out


def _prefixes(name: str) -> list[str]:
    """`a.b.c` -> `a`, `a.b`, `a.b.c`."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]
