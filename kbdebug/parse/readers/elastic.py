"""torch.distributed.elastic's failure table, printed by torchrun when a worker dies: each row is a failure,
its field lines (`exitcode : -6 (pid: 1234)`) extend it, and a line of no field closes the table."""

from __future__ import annotations

from collections.abc import Sequence

from kbdebug.normalise import Line
from kbdebug.parse.derive import anchors
from kbdebug.parse.fields import Fields, FieldTransformer
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, Sink, read_at
from kbdebug.records import ElasticFailure, Frame


class ElasticTree(FieldTransformer):
    """elastic.lark's tree to the kind of table line and the ElasticFailure fields it holds."""

    grammar = "elastic"

    def root(self, children: list[object]) -> Fields:
        return {"root": True}


class ElasticReader(Reader):
    order = 70

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        self.elastic: ElasticFailure | None = None
        self.elastic_root = False
        self.elastic_table = False  # inside the table: its field lines are read

    def read(self, line: Line) -> bool:
        if self.elastic_table or anchors("elastic", "table_head").starts(line.text, 1):
            self.elastic_line(line)
        return False

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
            self.sink.emit(self.elastic)
        elif self.elastic is not None:
            for key, val in fields.items():
                setattr(self.elastic, key, val)
            self.elastic.last_line = line.no
