"""PyTorch and MONAI message templates (grammars/messages/messages.lark): the values each one names, the
roles of the shapes it names, and the op on the source line that raised it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from lark import Token

from kbdebug import _regex_cache
from kbdebug.core.shapes import flattened_classes
from kbdebug.normalise import Line
from kbdebug.parse.derive import anchors
from kbdebug.parse.fields import Fields, FieldTransformer, unquote, value
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, Sink, containing, read_at
from kbdebug.records import ArchWarning, Frame, PyException, Record, TorchMessage
from kbdebug.records.job import signal_of_text

_INDEX_OPS = _regex_cache.compile(r"\b(gather|scatter(?:_add|_reduce)?_?|take_along_dim|index_select|index_put_?|index_add_?|embedding)\(")
_ROLES = ("input_shape", "target_shape")
# Values that are lists of ints, each its own rule of INTs: `view(-1, 3, 2048)`'s shape (-1: the dim view infers), an
# RNN's hidden state `(layers * directions, batch, hidden)` expected and given, a LayerNorm's `normalized_shape`
_INT_LISTS = frozenset(
    {
        "view_shape",
        "hidden_expected",
        "hidden_given",
        "normalized_shape",
        "bmm_expected",
        "bmm_given",
        "inplace_shape",
        "broadcast_result",
        "pad_input",
        "value_shape",
        "index_result_shape",
        "split_sizes",
        "grad_given",
        "grad_expected",
        "grid_input_shape",
        "grid_shape",
    }
)
# ... and those printed as one token, by their separator: a pooling's input and output, channels first (`3x2x2`), the
# indices of the parameters DDP got no gradient for (`2 3`)
_SPLIT_LISTS = {"pool_input": "x", "pool_output": "x", "unused_param_indices": None}


class Shape(list[int]):
    """A shape a message names, in the order it names them."""


class MessageTree(FieldTransformer):
    """messages.lark's tree to a TorchMessage's fields: the named values go to `values`, every shape
    to `shapes` (in the message's order) and the shapes with a role to `input_shape`/`target_shape`."""

    def dims(self, children: list[Token]) -> list[int]:
        return [int(t) for t in children]

    def shape(self, children: list[Any]) -> Shape:
        return Shape(children[0] if children else [])

    def input_shape(self, children: list[Shape]) -> Fields:
        return {"input_shape": children[0]}

    def target_shape(self, children: list[Shape]) -> Fields:
        return {"target_shape": children[0]}

    def expected(self, children: list[Token]) -> Fields:  # `to be Long or Int`: the alternatives, as written
        return {"expected": " or ".join(unquote(str(value(t))) for t in children)}

    def found(self, children: list[Token]) -> Fields:
        return {"found": unquote(str(value(children[0])))}

    def pickled_object(self, children: list[Token]) -> Fields:  # `'main.<locals>.<lambda>'`, or `<lambda>`
        return {"pickled_object": unquote(str(value(children[0])))}

    def cv_function(self, children: list[Token]) -> Fields:  # `'cvtColor'` (OpenCV 4) or `resize` (OpenCV 3)
        return {"cv_function": unquote(str(value(children[0])))}

    def tensor_shape(self, children: list[Shape]) -> Fields:
        return {"tensor_shape": list(children[0])}

    def supported_archs(self, children: list[Token]) -> Fields:
        return {"supported_archs": str(children[0]).split()}

    grammar = "messages"

    def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
        if data in self.templates or data == "start":
            return self._template(str(data), children)
        if data in _INT_LISTS:  # a list even of one value (`normalized_shape=[16]`), where the base reads one int
            return {data: [int(t) for t in children]}
        if data in _SPLIT_LISTS:
            return {data: [int(d) for d in str(children[0]).split(_SPLIT_LISTS[data])]}
        return super().__default__(data, children, meta)

    def _template(self, name: str, children: list[Any]) -> Fields:
        if name == "start":  # the template's fields, and where the template's text ends
            fields = next((c for c in children if isinstance(c, dict)), {})
            # the space before REST is the lexer's to skip or keep (LALR skips it, Earley keeps it): not the text's
            rest = next((str(c).lstrip() for c in children if isinstance(c, Token) and c.type == "REST"), "")
            return {**fields, "rest": rest}
        values: Fields = {}
        out: Fields = {"template": name, "values": values, "shapes": []}
        for child in children:
            if isinstance(child, Shape):
                out["shapes"].append(list(child))
            elif isinstance(child, dict):
                for key, val in child.items():
                    if key in _ROLES:
                        out[key] = list(val)
                        out["shapes"].append(list(val))
                    else:
                        values[key] = val
        derive = _DERIVED.get(name)
        if derive is not None:
            values.update(derive(out))
        return out


def _extra_singleton(out: Fields) -> Fields:
    """`Expected target size [B, D], got [B, 1, D]`: the label carries an extra dim of size 1."""
    a, b = (out["shapes"] + [[], []])[:2]
    return {"extra_singleton_dim": 1} if len(b) == len(a) + 1 and len(b) > 1 and b[1] == 1 else {}


def _flattened(a: str, b: str) -> Callable[[Fields], Fields]:
    """`Expected input batch_size (6750208) to match target batch_size (65536)`, a broadcast of `6750208` against
    `65536`, TH's `inconsistent tensor size` of `16384` and `49152` elements: flattened logits that kept their
    class dim against a flattened label; the class count is the ratio (kbdebug.core.shapes)."""

    def derive(out: Fields) -> Fields:
        x, y = out["values"].get(a), out["values"].get(b)
        k = flattened_classes(x, y) if isinstance(x, int) and isinstance(y, int) else None
        return {} if k is None else {"flattened_classes": k}

    return derive


def _view_numel(out: Fields) -> Fields:
    """`shape '[8, 3, 2048]' is invalid for input of size 24576`: how many elements the shape asks for
    (the product of its known dims; `-1` is inferred), so a guide can say what is missing."""
    known = [d for d in out["values"].get("view_shape", []) if d >= 0]
    product = 1
    for d in known:
        product *= d
    return {"view_numel": product, "view_infers": len(known) < len(out["values"].get("view_shape", []))}


def _inplace(out: Fields) -> Fields:
    """`which is output 0 of ReluBackward0, is at version 2; expected version 1`: the op named by the tensor's
    grad_fn (`relu`: the op that produced it, or the in-place op that wrote it last), and how many in-place
    writes changed it since it was saved."""
    vals = out["values"]
    derived: Fields = {"inplace_writes": int(vals.get("version", 0)) - int(vals.get("expected_version", 0))}
    fn = str(vals.get("grad_fn") or "")
    if fn:
        derived["last_op"] = re.sub(r"Backward\d*$", "", fn).lower() or fn
    return derived


# Values a template implies rather than names: anomaly mode names the backward function, which is the op;
# a DataLoader names its worker's signal by strsignal's text (`Bus error`), a fact names it as `SIGBUS`.
_DERIVED = {
    "worker_killed": lambda out: {"signal": signal_of_text(str(out["values"].get("signal_text", "")))},
    "batch_size": _flattened("input_batch", "target_batch"),
    "broadcast": _flattened("size_a", "size_b"),
    "inconsistent": _flattened("size_a", "size_b"),
    "view_size": _view_numel,
    "unflatten_size": _view_numel,
    "inplace_version": _inplace,
    "target_size_nd": _extra_singleton,
    "anomaly_nan": lambda out: {"op": out["values"].get("backward_function")},
    "anomaly_detected": lambda out: {"op": out["values"].get("backward_function")},
}


# A wrapper's note about where the exception it re-raises came from: it says nothing of that exception's shapes.
_WRAPPERS = ("caught_in_worker", "caught_in_replica")


class MessagesReader(Reader):
    """The first message template in a line, wherever it starts (derived from messages.lark); read again in
    an exception's message read whole."""

    order = 90
    reads_messages = True

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        self.arch: ArchWarning | None = None

    def read(self, line: Line) -> bool:
        text = line.text
        for start in anchors("messages").starts(text):
            if self.message(line, text[start:]):
                break
        return False

    def message(self, line: Line, text: str) -> bool:
        tree = parse("messages", text)
        if tree is None:
            return False
        fields = MessageTree().transform(tree)
        name, values, rest = fields["template"], fields["values"], fields.pop("rest")
        if name == "arch_incompatible":
            self.arch = ArchWarning(**read_at(line), gpu_name=values["gpu_name"], device_capability=values["device_capability"])
            self.sink.emit(self.arch)
            return True
        if name == "arch_supported":
            if self.arch is not None:
                self.arch.supported_archs = values["supported_archs"]
                self.arch.last_line = line.no
            return True
        body = text[: len(text) - len(rest)] if rest else text
        self.sink.emit(TorchMessage(**read_at(line), text=body.strip(), **fields))
        return True

    @classmethod
    def link(cls, records: list[Record]) -> None:
        """A message printed in an exception's lines says something of that exception: a wrapper's note
        (`Caught X in DataLoader worker process N`, `Caught X in replica N on device D`) is no error, only the worker or
        replica the exception came from; an
        index error's op is the one named on the source line that raised it."""
        for msg in [r for r in records if isinstance(r, TorchMessage)]:
            exc = containing(records, "exception", msg.first_line)
            if isinstance(exc, PyException):
                msg.context_text = exc.context_text
                if exc.template is None and msg.template not in _WRAPPERS and " ".join(msg.text.split()) in exc.folded_message:
                    exc.template = msg.template  # the exception's own message: its template says what its shapes are
            if msg.template in _WRAPPERS:
                records.remove(msg)
                worker, replica = msg.values.get("worker"), msg.values.get("replica")
                # the wrapper and the error it re-raises (printed under `Original Traceback`) both came from there
                inner = [
                    r for r in records if isinstance(r, PyException) and r.original and exc is not None and r.first_line > exc.first_line
                ]
                for target in [exc, *inner[:1]]:
                    if isinstance(target, PyException) and isinstance(worker, int):
                        target.worker = worker
                    if isinstance(target, PyException) and isinstance(replica, int):
                        target.replica = replica
            elif msg.template == "index_oob" and isinstance(exc, PyException) and (op := _calling_op(exc.frames, _INDEX_OPS)):
                msg.values["op"] = op


def _calling_op(frames: list[Frame], pattern: re.Pattern[str]) -> str | None:
    """The op named on the source line that raised, when the traceback printed it."""
    for frame in reversed(frames[-3:]):
        m = pattern.search(frame.code or "")
        if m:
            return m.group(1)
    return None
