"""torch.distributed failures: ProcessGroupNCCL watchdog lines, NCCL errors and the rows of
torch.distributed.elastic's failure table."""

from __future__ import annotations

import re

from lark import Tree

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at, to_int
from kbdebug.parse.grammar import first_alt, parse, subtree, token
from kbdebug.records import ElasticFailure, NcclEvent

_TABLE_KEY = re.compile(r"^\s*(?:\[\d+\]|time|host|rank|local_rank|exitcode|error_file|traceback)\s*:")
_DIST_HINT = re.compile(r"NCCL|Watchdog|watchdog|Root Cause|Other Failures")


class DistributedReader(State):
    def distributed(self, line: Line) -> None:
        text = line.text.strip()
        m = re.search(
            r"\[[EWI]\d*(?: [\d:.]+)? ProcessGroupNCCL|Watchdog caught|Process group watchdog|NCCL error"
            r"|Root Cause|Other Failures",
            text,
        )
        candidates = [text[m.start() :]] if m else [text]
        tree = None
        for cand in candidates:
            tree = parse("distributed", cand)
            if tree is not None:
                break
        if tree is None:
            return
        alt = first_alt(tree)
        base = read_at(line)
        if alt.data == "watchdog":
            rank_tag = token(alt, "RANK_TAG")
            rank = int(re.findall(r"\d+", rank_tag)[-1]) if rank_tag else line.rank
            base["rank"] = rank
            inner = first_alt(alt) if not isinstance(alt.children[-1], Tree) else alt.children[-1]
            if inner.data == "terminated":  # the watchdog's exception is often the timeout itself
                inner = subtree(inner, "timeout") or inner
            if inner.data == "timeout":
                fields = {token(f, "WORK_KEY"): token(f, "WORK_VAL") for f in inner.find_data("work_field")}
                self.out.append(
                    NcclEvent(
                        **base,
                        event="watchdog_timeout",
                        text=text,
                        op_type=fields.get("OpType"),
                        seq_num=to_int(fields.get("SeqNum")),
                        timeout_ms=to_int(fields.get("Timeout(ms)")),
                        ran_for_ms=to_int(token(inner, "INT")),
                    )
                )
            elif inner.data == "terminated":
                self.out.append(NcclEvent(**base, event="watchdog_exception", text=text))
            else:
                self.out.append(NcclEvent(**base, event="aborted", text=text))
        elif alt.data == "nccl_error":
            self.out.append(NcclEvent(**base, event="nccl_error", text=text, nccl_error=(token(alt, "REST") or "").strip()))
        elif alt.data == "table_head":
            self.elastic_root = text.startswith("Root Cause")
        elif alt.data == "table_field":
            key = (token(alt, "TABLE_KEY") or "").strip()
            val = (token(alt, "REST") or "").strip()
            if key.startswith("["):
                self.elastic = ElasticFailure(**base, root=self.elastic_root)
                self.out.append(self.elastic)
            elif self.elastic is not None:
                self.elastic.last_line = line.no
                if key == "rank":
                    nums = re.findall(r"\d+", val)
                    self.elastic.failed_rank = to_int(nums[0]) if nums else None
                    self.elastic.local_rank = to_int(nums[1]) if len(nums) > 1 else None
                elif key == "exitcode":
                    self.elastic.exitcode = to_int((re.findall(r"-?\d+", val) or [None])[0])
                elif key == "host":
                    self.elastic.host = val
                elif key == "time":
                    self.elastic.time = val
                elif key == "error_file":
                    self.elastic.error_file = val
