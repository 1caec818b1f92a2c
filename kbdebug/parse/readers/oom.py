"""CUDA (and XPU) out-of-memory messages, in the 2.x sentence form and the 1.x parenthesised form."""

from __future__ import annotations

from lark import Token

from kbdebug.normalise import Line
from kbdebug.parse.derive import may_hold
from kbdebug.parse.fields import Fields, FieldTransformer
from kbdebug.parse.lines import parse_in
from kbdebug.parse.reader import Reader, read_at
from kbdebug.records import Oom


class OomTree(FieldTransformer):
    """oom.lark's tree to an Oom's fields (the grammar names each figure)."""

    grammar = "oom"

    def exc_type(self, children: list[Token]) -> Fields:
        return {"exc_type": str(children[0]).split(":")[0].strip()} if children else {}

    def process(self, children: list[Token]) -> Fields:
        return {}  # another process's use of the GPU: not a figure of this allocation


class OomReader(Reader):
    """One record per message; read again whole when the message was wrapped (its figures on later lines)."""

    order = 50
    reads_messages = True

    def read(self, line: Line) -> bool:
        text = line.text
        if may_hold("oom", text) and (tree := parse_in("oom", text.strip())) is not None:
            self.sink.emit(Oom(**read_at(line), **OomTree().transform(tree)))
        return False
