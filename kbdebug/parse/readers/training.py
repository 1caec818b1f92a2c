"""A training run's progress lines whose loss is NaN or inf: one record for the log, at the first such line,
with the epoch and step that line names and how many such lines there are."""

from __future__ import annotations

import re
from collections.abc import Sequence

from lark import Token

from kbdebug import _regex_cache
from kbdebug.normalise import Line
from kbdebug.parse.derive import may_hold
from kbdebug.parse.fields import Fields, FieldTransformer, unquote
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, Sink, read_at
from kbdebug.records import Frame, NonFiniteLoss, Record

# Where an item of a progress line may start: a word, or a quoted key (`'loss': nan`, `"epoch": 3`).
_ITEM_START = _regex_cache.compile(r"(?<![\w'\"/.-])['\"]?[A-Za-z_]")
_ITEM_END = _regex_cache.compile(r"(?=[\s,;|}):])|$")  # where a position item may end
MAX_POSITION = 32  # characters of an item read as a position, at most


class TrainingTree(FieldTransformer):
    """training.lark's tree to the fields of one item: a loss's key and value, or an epoch's or step's."""

    grammar = "training"

    def __init__(self) -> None:
        super().__init__()
        self.templates = self.templates | {"position"}  # training_position.lark's one template

    def loss_key(self, children: list[Token]) -> Fields:
        return {"loss_name": unquote(str(children[0]).strip())}

    def position(self, children: list[Fields]) -> Fields:
        fields: Fields = {}
        for child in children:
            if isinstance(child, dict):
                fields.update(child)
        key = unquote(str(fields.pop("position_key", ""))).lower()
        number = re.match(r"\[?\s*([\d.]+)", str(fields.pop("position_value", "")))
        if number:
            fields["epoch" if key == "epoch" else "step"] = number.group(1)
        return fields

    def loss_value(self, children: list[Token]) -> Fields:
        return {"loss_value": str(children[0]).lstrip(" \t=:(")}  # the value, without the separator it holds


class TrainingReader(Reader):
    """Reads the lines that hold a non-finite value; extends the record of the first for the lines after it."""

    order = 90

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        self.first: NonFiniteLoss | None = None

    def read(self, line: Line) -> bool:
        if not may_hold("training", line.text):
            return False
        items = self._items(line.text)
        losses = [(at, f) for at, f in items if "loss_value" in f]
        if not losses:
            return False
        if self.first is not None:
            self.first.lines += len(losses)
            return False
        at, loss = losses[0]
        self.first = NonFiniteLoss(**read_at(line), loss_name=loss["loss_name"], loss_value=loss["loss_value"], **self._position(items, at))
        self.first.lines = len(losses)  # a progress bar redrawn at one width reads as one wrapped line
        self.sink.emit(self.first)
        return False

    @staticmethod
    def _position(items: list[tuple[int, Fields]], at: int) -> Fields:
        """The epoch and step of the loss at offset `at`: the nearest named before it (`Epoch 2: ... loss=nan`),
        else the first after it (`{'loss': nan, ..., 'epoch': 0.75}`)."""
        out: Fields = {}
        for key in ("epoch", "step"):
            before = [f[key] for start, f in items if key in f and start < at]
            after = [f[key] for start, f in items if key in f and start > at]
            if before or after:
                out[key] = before[-1] if before else after[0]
        return out

    @staticmethod
    def _items(text: str) -> list[tuple[int, Fields]]:
        """The loss and position items of a line, by offset, read from each place an item may start; a position is
        the longest text from there that training_position.lark reads (`Epoch [3/10]`, not `Epoch [3/10], Step`)."""
        out: list[tuple[int, Fields]] = []
        for m in _ITEM_START.finditer(text):
            start = m.start()
            tree = parse("training", text[start:])
            if tree is None:
                ends = [e.start() for e in _ITEM_END.finditer(text, start + 1, start + MAX_POSITION)]
                tree = next((t for end in reversed(ends) if (t := parse("training_position", text[start:end]))), None)
            if tree is not None:
                fields = TrainingTree().read(tree)
                fields.pop("template", None)
                out.append((start, fields))
        return out

    @classmethod
    def settle(cls, records: list[Record]) -> list[Record]:
        """One record for the whole log: the first region's, counting every region's lines."""
        losses = [r for r in records if isinstance(r, NonFiniteLoss)]
        if len(losses) > 1:
            losses[0].lines = sum(r.lines for r in losses)
        return [r for r in records if not isinstance(r, NonFiniteLoss) or r is losses[0]]
