"""The context an error came from, and the commands that can help in it.

`CUDA_LAUNCH_BLOCKING=1 python train.py` does nothing for an error raised on the CPU, names a file
that does not exist when the error came from a notebook cell, and repeats itself after
`kbdebug run --rerun`. So every incident gets context facts read from what is already known:

- `device`: "cuda" when anything in the incident comes from the GPU (a kernel assert, a CUDA or
  library status, a tensor on a CUDA device on the failing line), "cpu" when an exception was read
  and nothing points at a GPU;
- `origin`: "log" (`kbdebug explain`), "script" / "notebook" (`diagnose(exc)`, IPython frames),
  "run" / "rerun" (`kbdebug run`, its CUDA_LAUNCH_BLOCKING=1 re-run);
- `launch_blocking`: True when kernel launches were already synchronous;
- `libraries`: the packages the traceback's frames run through (`monai`, `transformers`), so
  library-specific advice appears only where that library is in the frames.

Which commands then help in that context is the guide stage's to say (kbdebug.diagnoser.guides.applicable),
by what the tool each runs needs (kbdebug.kb.commands).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from functools import lru_cache
from typing import Any

from kbdebug import _regex_cache
from kbdebug.core.facts import Facts, merge
from kbdebug.diagnoser.plain import plain_facts
from kbdebug.diagnosis import Incident
from kbdebug.kb.commands import needs_cuda
from kbdebug.kb.model import Rule
from kbdebug.records import PyException

ORIGINS = ("log", "script", "notebook", "run", "rerun")
# How code names a label/target tensor (`label`, `target`, `gt_mask`, `y_true`, `masks`); the other operand is the prediction.
LABEL_NAME = _regex_cache.compile(r"(?i)label|target|\bgts?\b|^gt_|_gt\b|ground_?truth|mask|^y(?:_?true)?$|annotation|seg_?map")
_NOTEBOOK_FILE = _regex_cache.compile(r"^(?:Cell In\s*\[|<ipython-input-)|[\\/]ipykernel_\d+[\\/]")
_PACKAGE = _regex_cache.compile(r"(?:site|dist)-packages[\\/]([A-Za-z_]\w*)")
_CUDA_FACTS = (
    "cuda_error",
    "kernel_file",
    "tool",
    "cublas_status",
    "cudnn_status",
    "nccl_event",
    "gpu_index",
    "tried_to_allocate",
    "device_capability",
)


def frame_files(inc: Incident) -> list[str]:
    return [f.file for rec in inc.records if isinstance(rec, PyException) for f in rec.frames]


def libraries(files: list[str]) -> list[str]:
    """Installed packages the frames run through, in first-seen order (torch included)."""
    return list(dict.fromkeys(m.group(1) for f in files if (m := _PACKAGE.search(f.replace("\\\\", "\\")))))


def device_of(inc: Incident, device_side: bool = False) -> str | None:
    """ "cuda" on any GPU evidence; "cpu" when the failing line's tensors are all on the CPU, or when
    the rule is a device-side one (its CUDA form is a kernel assert or CUDA error) and the incident
    holds only the readable exception its CPU form raises; None (unknown) otherwise: a shape error
    reads the same on either device."""
    f = inc.facts
    tensors = f.get("frame_tensors") or {}
    devices = {str(t.get("device", "")).split(":")[0] for t in tensors.values() if isinstance(t, dict)}
    message = f"{f.get('error_message', '')} {f.get('device_a', '')} {f.get('device_b', '')}"
    if inc.device_evidence or "cuda" in devices or any(k in f for k in _CUDA_FACTS) or re.search(r"(?i)\bcuda", message):
        return "cuda"
    if devices == {"cpu"} or (device_side and any(rec.kind in ("exception", "message") for rec in inc.records)):
        return "cpu"
    return None


def context_facts(inc: Incident, origin: str | None = None, device_side: bool = False) -> dict[str, Any]:
    """The context facts of one incident (see the module's docstring); `device_side`: its rule offers
    commands that need CUDA, so its CUDA form would have left GPU evidence."""
    files = frame_files(inc)
    own = str(inc.facts.get("innermost_user_frame") or "")
    if any(_NOTEBOOK_FILE.search(x) for x in [*files, own]):
        origin = "notebook" if origin in (None, "log", "script") else origin
    facts: dict[str, Any] = {"origin": origin or "log"}
    device = device_of(inc, device_side)
    if device:
        facts["device"] = device
    blocking = origin == "rerun" or (origin in ("script", "notebook", "run") and os.environ.get("CUDA_LAUNCH_BLOCKING") == "1")
    if blocking:
        facts["launch_blocking"] = True
    libs = libraries(files)
    if libs:
        facts["libraries"] = libs
    facts.update(tensor_roles(inc.facts.get("frame_tensors") or {}))
    facts.update(operand_names(str(inc.facts.get("user_code") or ""), inc.facts.get("frame_tensors") or {}))
    facts.update(dtype_roles({**inc.facts, **facts}))
    facts.update(source_tensor(inc.facts))
    facts.update(_plain(inc.facts))
    facts.update(index_select_call(str(inc.facts.get("user_code") or "")))
    settings = call_settings(str(inc.facts.get("user_code") or ""))
    if settings:
        facts["call_settings"] = settings
        if isinstance(settings.get("num_classes"), int):
            facts["num_classes"] = settings["num_classes"]  # what the call was told beats what a shape suggests
    return facts


def _plain(facts: Facts) -> dict[str, Any]:
    """What a plain Python error names (kbdebug.diagnoser.plain): of the exception a worker re-raised, where its message
    prints one (read live: kbdebug.runtime.plain_errors), else of the error on the failing line."""
    if facts.get("inner_error_type"):
        return plain_facts(str(facts["inner_error_type"]), str(facts.get("inner_error_message") or ""), str(facts.get("inner_code") or ""))
    return plain_facts(str(facts.get("error_type") or ""), str(facts.get("error_message") or ""), str(facts.get("user_code") or ""))


@lru_cache(maxsize=256)
def _parsed(code: str) -> ast.Module | None:
    """A failing line of code as Python parses it (None: it does not), once for both readings of it (`operand_names`,
    `call_settings`, which only read the tree) and for a line that fails in log after log."""
    try:
        return ast.parse(code.strip().rstrip(":"))
    except SyntaxError:
        return None


def call_settings(code: str) -> dict[str, Any]:
    """Literal keyword arguments on a line of code (`num_classes=5`, `ignore_index=255`, `to_onehot=14`)."""
    tree = _parsed(code)
    if tree is None:
        return {}
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg and isinstance(node.value, (ast.Constant, ast.UnaryOp)):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, (int, float, bool)):
                out.setdefault(node.arg, value)
    return out


def index_select_call(code: str) -> dict[str, Any]:
    """`feats.index_select(0, keep)` or `torch.index_select(feats, 0, keep)` on the failing line: the tensor it selects
    from (`select_source`, a dotted name), the literal dim (`select_dim`) and the index's name (`select_index`), so a
    guide writes the bound check with the user's own names; {} for any other form."""
    tree = _parsed(code)
    if tree is None:
        return {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "index_select"):
            continue
        base, args = node.func.value, list(node.args)
        if isinstance(base, ast.Name) and base.id == "torch":  # the function form takes the tensor first
            base, args = (args[0], args[1:]) if args else (base, [])
        if not args or not _dotted(base):
            return {}
        try:
            dim = ast.literal_eval(args[0])
        except ValueError:
            return {}
        if not isinstance(dim, int) or isinstance(dim, bool):
            return {}
        out: dict[str, Any] = {"select_source": ast.unparse(base), "select_dim": dim}
        if len(args) > 1 and isinstance(args[1], ast.Name):
            out["select_index"] = args[1].id
        return out
    return {}


def _dotted(node: ast.expr) -> bool:
    """A name or an attribute of one (`feats`, `self.memory.keys`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def tensor_roles(tensors: dict[str, Any]) -> dict[str, Any]:
    """Which tensor on the failing line holds the scores and which the indices: with exactly one
    floating tensor of rank >= 2 and one integer tensor, `num_classes` is the scores' dimension 1
    and `index_tensor`/`index_min`/`index_max` name the integer one (a loss target, gather index)."""
    floats = [(n, t) for n, t in tensors.items() if str(t.get("dtype", "")).startswith(("float", "bfloat", "half"))]
    ints = [(n, t) for n, t in tensors.items() if str(t.get("dtype", "")).startswith(("int", "uint", "long"))]
    out: dict[str, Any] = {}
    if len(ints) == 1:
        name, t = ints[0]
        out["index_tensor"] = name
        if "min" in t:
            out.update(index_min=t["min"], index_max=t["max"])
    scores = [(n, t) for n, t in floats if len(t.get("shape", [])) >= 2]
    if len(scores) == 1 and len(ints) == 1:
        out["scores_tensor"], out["num_classes"] = scores[0][0], scores[0][1]["shape"][1]
    return out


# How torch's messages name a dtype (`Double`, `double`, `c10::Half`, `long int`, `torch.FloatTensor`,
# `torch.float64`) -> the name `torch.<name>` has; and the method that converts to it.
_DTYPES = {
    "double": "float64", "float64": "float64", "doubletensor": "float64",
    "float": "float32", "float32": "float32", "floattensor": "float32",
    "half": "float16", "float16": "float16", "halftensor": "float16",
    "bfloat16": "bfloat16", "bfloat16tensor": "bfloat16",
    "long": "int64", "longint": "int64", "int64": "int64", "longtensor": "int64",
    "int": "int32", "int32": "int32", "inttensor": "int32",
    "short": "int16", "int16": "int16", "char": "int8", "signedchar": "int8", "int8": "int8",
    "byte": "uint8", "unsignedchar": "uint8", "uint8": "uint8", "bytetensor": "uint8",
    "bool": "bool", "booltensor": "bool",
}  # fmt: skip
CAST_METHODS = {
    "float32": ".float()",
    "float64": ".double()",
    "float16": ".half()",
    "bfloat16": ".bfloat16()",
    "int64": ".long()",
    "int32": ".int()",
    "bool": ".bool()",
}
DEFAULT_FLOAT = "float32"  # torch's default dtype: what parameters are made in, and so what an input must match
# Which operand a template's `dtype_a` / `dtype_b` is (the other names its operands itself: `mat1`, `m1`).
_SIDES = {
    "input_bias_type": ("input", "bias"),
    "rnn_dtype": ("input", "weight"),
    "rnn_hidden_dtype": ("input", "hidden state"),
    "index_put_dtype": ("source", "destination"),
    "input_weight_type": ("input", "weight"),
    "tensor_args_type": ("input", "weight"),
}


def torch_dtype(name: object) -> str | None:
    """`Double` / `double` / `c10::Half` / `torch.cuda.FloatTensor` / `torch.float64` -> `float64`."""
    text = re.sub(r"^(?:torch\.(?:cuda\.)?|c10::|at::)", "", str(name or "").strip().strip("'\"")).lower().replace(" ", "")
    return _DTYPES.get(text)


def dtype_roles(facts: dict[str, Any]) -> dict[str, Any]:
    """For a dtype clash: the dtype the op wanted and the one it found (torch's names), which operand of the
    message holds the odd one, and the tensor on the failing line that does (`cast_tensor`) with the call that
    converts it (`cast_call`). Between two floating dtypes the wanted one is torch's default float when it is one of
    the two: parameters are made in it, so the other side (a numpy float64 batch, a half input on the CPU) is what
    to convert."""
    template = str(facts.get("message_template") or "")
    # (a layer's check names its operands' tensor types: `torch.cuda.HalfTensor` against the weight's `torch.cuda.FloatTensor`)
    a = torch_dtype(facts.get("dtype_a") or facts.get("found") or facts.get("input_type"))
    b = torch_dtype(facts.get("dtype_b") or facts.get("expected") or facts.get("weight_type"))
    if template == "index_dtype":
        a, b = a, "int64"
    elif template in ("not_implemented", "float_only"):  # one dtype, which the op has no kernel for or no use for
        a, b = torch_dtype(facts.get("found")), DEFAULT_FLOAT
    if a is None or b is None or a == b:
        return {}
    # never swapped onto an index type: a message that wants Long (an embedding's indices, a loss's labels) and found
    # float32 means those values must become integers, whatever the parameters are made in. An in-place result cast
    # (`result type Float can't be cast to the desired output type Long`) names the tensor written into as expected:
    # that tensor is the odd one (knowledge/dtype_mismatch: compute out of place)
    float_pair = a == DEFAULT_FLOAT and template != "index_dtype" and b.startswith(("float", "bfloat"))
    found, wanted = (b, a) if float_pair or template == "result_cast" else (a, b)
    out: dict[str, Any] = {"dtype_found": found, "dtype_wanted": wanted, "cast_call": CAST_METHODS.get(wanted, f".to(torch.{wanted})")}
    names = _SIDES.get(template) or (facts.get("operand_a"), facts.get("operand_b"))
    if names[0] and names[1]:
        out["odd_operand"] = names[0] if found == a else names[1]
    tensors = facts.get("frame_tensors") or {}
    odd = [n for n, t in tensors.items() if isinstance(t, dict) and t.get("dtype") == found]
    if len(odd) > 1 and facts.get("label_name") in odd:  # a loss: floats are the prediction's to have, indices the label's
        wants_index = wanted.startswith(("int", "uint"))
        odd = [n for n in odd if (n == facts["label_name"]) == wants_index]
    if len(odd) == 1:
        out["cast_tensor"] = odd[0]
    return out


def source_tensor(facts: Facts) -> dict[str, Any]:
    """The tensor on the failing line that a view/reshape was asked of: the one holding `numel` elements."""
    numel = facts.get("numel")
    tensors = facts.get("frame_tensors") or {}
    if not isinstance(numel, int) or not tensors:
        return {}
    for name, t in tensors.items():
        shape = t.get("shape") if isinstance(t, dict) else None
        if isinstance(shape, list):
            size = 1
            for d in shape:
                size *= d
            if size == numel:
                return {"viewed_tensor": name, "viewed_shape": shape}
    return {}


def _operand(arg: ast.expr) -> str | None:
    """The tensor an argument names: `masks`, or the tensor a method chain starts from (`masks.float()`,
    `y.squeeze(1).long()`): a conversion on the line still passes the user's tensor."""
    while isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        arg = arg.func.value
    return arg.id if isinstance(arg, ast.Name) else None


def operand_names(code: str, tensors: dict[str, Any]) -> dict[str, Any]:
    """The user's own names for the label and the prediction (`label_name`, `pred_name`), for guides to say
    `label`/`logits` where the failing line does: from the tensors on the line when they were read, else from
    the two plain-name arguments of the line's call (`loss = criterion(logits, label)`)."""
    names = [n for n in tensors if isinstance(tensors[n], dict) and len(tensors[n].get("shape", [])) >= 1]
    if not names:
        tree = _parsed(code)
        if tree is None:
            return {}
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        args = [n for n in (_operand(a) for a in calls[0].args) if n] if calls else []
        names = args if len(args) == 2 else []
    labels = [n for n in names if LABEL_NAME.search(n)]
    others = [n for n in names if n not in labels]
    if len(labels) == 1 and len(others) == 1:
        return {"label_name": labels[0], "pred_name": others[0]}
    return {}


_TORCHRUN = _regex_cache.compile(r"(?:^|[\\/])torchrun$|^torch\.distributed\.(?:run|launch)$")
_LAUNCHER_FRAME = _regex_cache.compile(
    r"(?:^|[\\/])torchrun$|torch[\\/]distributed[\\/](?:run|launch)\.py$|torch[\\/]distributed[\\/]elastic[\\/]"
)


def launch_command(argv: list[str], env: dict[str, str], parent: list[str]) -> str:
    """The command that reruns this process as it was started: `python train.py --epochs 3` with its arguments;
    under torchrun (TORCHELASTIC_RUN_ID set) the launcher's own command line, read from the parent process,
    else `torchrun --nproc_per_node=N` built from the worker's environment, so the rerun keeps the ranks,
    the rendezvous and the environment torchrun gives each worker."""
    own = "python " + shlex.join(argv)
    if not env.get("TORCHELASTIC_RUN_ID"):
        return own
    for i, arg in enumerate(parent):
        if _TORCHRUN.search(arg):
            head = ["torchrun"] if arg.endswith("torchrun") else ["python", "-m", arg]
            return shlex.join(head + parent[i + 1 :])
    nodes = int(env.get("WORLD_SIZE", "1") or 1) // max(int(env.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    opts = [f"--nproc_per_node={env.get('LOCAL_WORLD_SIZE', '1')}"] + ([f"--nnodes={nodes}"] if nodes > 1 else [])
    return shlex.join(["torchrun", *opts, *argv])


def in_context(inc: Incident, rule: Rule | None, origin: str | None, fragments: dict[str, Facts], launcher: str | None = None) -> Incident:
    """The incident with its facts settled: what each producer said (`fragments`: the live frames, guard(), the
    records, the caller) merged by kbdebug.core.facts.PRECEDENCE, then the context read from them (see the module's
    docstring; `launcher`, "torchrun" when a log shows the job was started by one) where nothing said better."""
    said = inc.model_copy(update={"facts": merge(fragments)})
    device_side = rule is not None and needs_cuda(rule)
    context = context_facts(said, origin, device_side)
    if launcher:
        context["launcher"] = launcher
    return said.model_copy(update={"facts": merge({**fragments, "context": context})})


def log_launcher(incidents: list[Incident]) -> str | None:
    """ "torchrun" when the log shows torch.distributed.elastic at work: its failure table, or the launcher's
    own frames (`torchrun`, `torch/distributed/run.py`) in a traceback."""
    for inc in incidents:
        for rec in inc.records:
            if rec.kind == "elastic_failure":
                return "torchrun"
        if any(_LAUNCHER_FRAME.search(f.replace("\\", "/")) for f in frame_files(inc)):
            return "torchrun"
    return None
