"""Kernel assertion lines (`FILE:LINE: FUNC: block: [..], thread: [..] Assertion `COND` failed.`):
the grammar's tree to a record, a best-effort reading of lines mangled by interleaved device printf or
translated, and the grouping of the one-line-per-thread flood into one record per site."""

from __future__ import annotations

import re
from collections import Counter

from lark import Tree

from kbdebug.frames import basename
from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at, to_int, triple
from kbdebug.parse.grammar import first_alt, parse, token, tokens
from kbdebug.records import KernelAssert, Record

MAX_ASSERT_PARSES = 200  # beyond this many assert lines, the rest are counted by regex only
_ASSERT_HINT = re.compile(r"Assertion|assert", re.I)
_COORD = re.compile(
    r"block\s*[:：]\s*\[\s*(\d+)\s*[,，]\s*(\d+)\s*[,，]\s*(\d+)\s*\]\s*[,，]\s*"
    r"thread\s*[:：]\s*\[\s*(\d+)\s*[,，]\s*(\d+)\s*[,，]\s*(\d+)\s*\]"
)
_FUZZY_FILE = re.compile(r"(?<![\w\-])([\w\-]+\.(?:cuh?|hpp|h|cpp|cc|py))(?::(\d+))?")  # starts only where a name can: linear
_FUZZY_COND = re.compile(r"Assertion\s*[`'\"‘“](.+?)(?:[`'\"’”]\s*failed|$)")
_QUOTED_COND = re.compile(r"[`‘“]([^`’”]{3,}?)[`'’”]")  # the condition of a translated assert line, without `Assertion`
_FUZZY_LINE = re.compile(r":(\d+)(?=[,/\]:]|$)")


def kernel_assert(tree: Tree, line: Line) -> KernelAssert:
    alt = first_alt(tree)
    path = token(alt, "PATH") or "unknown"
    lineno = to_int(token(alt, "LINENO"))
    func = token(alt, "FUNC")
    triples = [triple(" ".join(tokens(t))) for t in alt.find_data("triple")]
    cond = (token(alt, "QUOTED_COND") or "").strip()
    cond = cond[1:-1] if len(cond) >= 2 and cond[-1] in "`'\"’”" else cond[1:]
    return KernelAssert(
        **read_at(line),
        path=path,
        kernel_file=basename(path),
        kernel_line=lineno,
        function=func.strip() if func else None,
        block=triples[0] if triples else None,
        thread=triples[1] if len(triples) > 1 else None,
        condition=cond.strip(),
        message=token(alt, "MESSAGE"),
        source="printf" if alt.data == "assert_line" else "printf",
    )


def clean_condition(cond: str) -> str:
    """Strip what interleaved device printf glued onto a condition."""
    cond = cond.strip()
    quotes = [m.end() for m in re.finditer(r'"[^"]*"', cond)]
    if quotes and quotes[-1] < len(cond):
        cond = cond[: quotes[-1]]
    cond = re.split(r"\s*[:：]\s*block\s*[:：]|\]\s*,\s*thread", cond)[0]
    return cond.strip()


def fuzzy_assert(line: Line) -> KernelAssert | None:
    """Best effort for lines mangled by concurrent device printf: file, condition, coordinates."""
    text = line.text.replace("【", "[").replace("】", "]")
    cond = _FUZZY_COND.search(text) or _QUOTED_COND.search(text)
    files = _FUZZY_FILE.findall(text)
    coords = _COORD.search(text)
    if not files or not (cond or coords):
        return None
    kernel_file, lineno = files[0][0], None
    for name, num in files:
        if num:
            kernel_file, lineno = name, int(num)
            break
    return KernelAssert(
        **read_at(line),
        path=kernel_file,
        kernel_file=kernel_file,
        kernel_line=lineno,
        condition=clean_condition(cond.group(1)) if cond else "",
        block=tuple(int(x) for x in coords.groups()[:3]) if coords else None,  # type: ignore[arg-type]
        thread=tuple(int(x) for x in coords.groups()[3:]) if coords else None,  # type: ignore[arg-type]
        source="fuzzy",
    )


def group_asserts(records: list[Record]) -> list[Record]:
    """Collapse the one-line-per-thread assert flood into one record per site."""
    out: list[Record] = []
    groups: dict[tuple, KernelAssert] = {}
    blocks: dict[tuple, set] = {}
    threads: dict[tuple, set] = {}
    fuzzy: list[KernelAssert] = []
    for rec in records:
        if not isinstance(rec, KernelAssert):
            out.append(rec)
            continue
        if rec.source == "fuzzy":
            fuzzy.append(rec)
            continue
        key = (rec.kernel_file, rec.kernel_line, rec.condition)
        if key not in groups:
            groups[key] = rec.model_copy()
            blocks[key], threads[key] = set(), set()
            out.append(groups[key])
        else:
            g = groups[key]
            g.count += 1
            g.last_line = rec.last_line
        blocks[key].add(rec.block)
        threads[key].add((rec.block, rec.thread))
    for key, g in groups.items():
        g.distinct_blocks = len(blocks[key] - {None}) or 1
        g.distinct_threads = len(threads[key]) or 1
    if fuzzy:
        merged = _merge_fuzzy(fuzzy, groups)
        if merged is not None:
            out.insert(_first_index(out, merged.first_line), merged)
    return out


def _first_index(records: list[Record], first_line: int) -> int:
    for i, rec in enumerate(records):
        if rec.first_line > first_line:
            return i
    return len(records)


def _merge_fuzzy(fuzzy: list[KernelAssert], groups: dict[tuple, KernelAssert]) -> KernelAssert | None:
    conds = Counter(f.condition for f in fuzzy if f.condition)
    files = Counter(f.kernel_file for f in fuzzy)
    kernel_file = files.most_common(1)[0][0]
    cond = conds.most_common(1)[0][0] if conds else ""
    for g in groups.values():
        if g.kernel_file == kernel_file and g.condition == cond:
            g.count += len(fuzzy)
            return None
    lines = Counter(f.kernel_line for f in fuzzy if f.kernel_line is not None)
    kernel_line = lines.most_common(1)[0][0] if lines else None
    if kernel_line is None:
        # interleaved printf: the line number survives only as `:N` fragments
        frags = Counter(int(n) for f in fuzzy for n in _FUZZY_LINE.findall(f.raw))
        if frags:
            num, seen = frags.most_common(1)[0]
            kernel_line = num if seen >= 3 else None
    first = fuzzy[0]
    return first.model_copy(
        update={
            "kernel_file": kernel_file,
            "path": kernel_file,
            "kernel_line": kernel_line,
            "condition": cond,
            "count": len(fuzzy),
            "last_line": fuzzy[-1].last_line,
            "block": first.block,
            "thread": first.thread,
        }
    )


_FILE_NAME = re.compile(r"^[\w\-.]+\.\w+$|^unknown$")


def _plausible(rec: KernelAssert) -> bool:
    """A strict parse of an interleaved line can still pick up garbage; reject such parses."""
    if not _FILE_NAME.match(rec.kernel_file) or rec.condition != clean_condition(rec.condition):
        return False
    return not (rec.function and re.search(r"[:：]\d+[:：]|block\s*:", rec.function))


class AssertReader(State):
    def assertion(self, line: Line) -> bool:
        self.asserts += 1
        text = line.text.strip()
        if self.asserts > MAX_ASSERT_PARSES:
            rec = fuzzy_assert(line)
            if rec is not None:
                rec.source = "printf" if _COORD.search(text) else "fuzzy"
                self.out.append(rec)
                return True
            return False
        start = re.search(r"(?:\[CUDA_KERNEL_ASSERT\]\s*)?(?:[A-Za-z]:[\\/])?[^\s:：]*[\w>)\]]\s*[:：]\s*\d+\s*[:：]", text)
        tree = parse("kernel_assert", text[start.start() :]) if start else None
        if tree is not None:
            rec = kernel_assert(tree, line)
            if _plausible(rec):
                self.out.append(rec)
                return True
        rec = fuzzy_assert(line)
        if rec is not None:
            self.out.append(rec)
            return True
        return False
