"""torch.distributed failures: ProcessGroupNCCL watchdog lines and NCCL errors (distributed.lark),
and the rows of torch.distributed.elastic's failure table (elastic.lark)."""

from __future__ import annotations

import re

from lark import Token

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at
from kbdebug.parse.derive import parse_in
from kbdebug.parse.fields import Fields, FieldTransformer, merge
from kbdebug.parse.grammar import parse
from kbdebug.records import ElasticFailure, NcclEvent


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


class ElasticTree(FieldTransformer):
    """elastic.lark's tree to the kind of table line and the ElasticFailure fields it holds."""

    grammar = "elastic"

    def root(self, children: list[object]) -> Fields:
        return {"root": True}


class DistributedReader(State):
    def distributed(self, line: Line) -> None:
        text = line.text.strip()
        tree = parse_in("distributed", text)  # the whole line keeps its tags
        if tree is not None:
            fields = NcclTree().read(tree)
            fields.pop("template")
            self.out.append(NcclEvent(**{**read_at(line), **fields}, text=text))

    def elastic_line(self, line: Line) -> None:
        """A line of the failure table; a line that is not one closes the table."""
        tree = parse("elastic", line.text.strip())
        if tree is None:
            self.elastic_table = False
            return
        fields = ElasticTree().read(tree)
        kind = fields.pop("template")
        if kind == "table_head":
            self.elastic_table, self.elastic_root = True, bool(fields.get("root"))
        elif kind == "table_row":
            self.elastic_table = True
            self.elastic = ElasticFailure(**read_at(line), root=self.elastic_root)
            self.out.append(self.elastic)
        elif self.elastic is not None:
            for key, val in fields.items():
                setattr(self.elastic, key, val)
            self.elastic.last_line = line.no
