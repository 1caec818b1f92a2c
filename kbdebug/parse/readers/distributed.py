"""torch.distributed failures: ProcessGroupNCCL watchdog lines, NCCL errors and NCCL's own warnings,
one record a line, wherever they start in it."""

from __future__ import annotations

import re

from lark import Token

from kbdebug.normalise import Line
from kbdebug.parse.derive import anchors
from kbdebug.parse.fields import Fields, FieldTransformer, merge
from kbdebug.parse.lines import parse_in
from kbdebug.parse.reader import Reader, read_at
from kbdebug.records import NcclEvent


class NcclTree(FieldTransformer):
    """distributed.lark's tree to an NcclEvent's fields; the event is the kind of line."""

    grammar = "distributed"

    def rank_tag(self, children: list[Token]) -> Fields:
        return {"rank": int(re.findall(r"\d+", str(children[0]))[-1])}  # `[PG 3 Rank 0]`: the last number

    def work_field(self, children: list[object]) -> Fields:
        return merge(children)  # WorkNCCL's other keys (NumelIn, ...) are not facts

    def timeout(self, children: list[object]) -> Fields:
        return {"event": "watchdog_timeout", **merge(children)}

    def terminated(self, children: list[object]) -> Fields:
        return {"event": "watchdog_exception", **merge(children)}  # the exception is often the timeout itself

    def aborting(self, children: list[object]) -> Fields:
        return {"event": "aborted"}

    def nccl_failure(self, children: list[object]) -> Fields:
        return {"event": "failure", "nccl_error": None, **merge(children)}

    def nccl_warn(self, children: list[object]) -> Fields:
        return {"event": "failure", **merge(children)}  # NCCL's own report of the failure it met


class DistributedReader(Reader):
    order = 60

    def read(self, line: Line) -> bool:
        if anchors("distributed").starts(line.text, 1):
            self.distributed(line)
        return False

    def distributed(self, line: Line) -> None:
        text = line.text.strip()
        tree = parse_in("distributed", text)  # the whole line keeps its tags
        if tree is not None:
            fields = NcclTree().read(tree)
            fields.pop("template")
            self.sink.emit(NcclEvent(**{**read_at(line), **fields}, text=text))
