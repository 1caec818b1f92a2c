"""Kernel assertion lines (`FILE:LINE: FUNC: block: [..], thread: [..] Assertion `COND` failed.`):
the grammar's tree to a record, a best-effort reading of lines mangled by interleaved device printf or
translated, and the grouping of the one-line-per-thread flood into one record per site."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from lark import Token, Tree

from kbdebug import _regex_cache
from kbdebug.core.frames import basename
from kbdebug.normalise import Line
from kbdebug.parse.fields import Fields, FieldTransformer
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, Sink, read_at
from kbdebug.records import Frame, KernelAssert, Record

MAX_ASSERT_PARSES = 200  # beyond this many assert lines, the rest are counted by regex only
MAX_SHAPES = 64  # distinct assert lines (less their coordinates) kept to read the other threads of each by
_ASSERT_HINT = _regex_cache.compile(r"Assertion|assert", re.I)
_COORD = _regex_cache.compile(
    r"block\s*[:：]\s*\[\s*(\d+)\s*[,，]\s*(\d+)\s*[,，]\s*(\d+)\s*\]\s*[,，]\s*"
    r"thread\s*[:：]\s*\[\s*(\d+)\s*[,，]\s*(\d+)\s*[,，]\s*(\d+)\s*\]"
)
_FUZZY_FILE = _regex_cache.compile(r"(?<![\w\-])([\w\-]+\.(?:cuh?|hpp|h|cpp|cc|py))(?::(\d+))?")  # starts only where a name can: linear
_FUZZY_COND = _regex_cache.compile(r"Assertion\s*[`'\"‘“](.+?)(?:[`'\"’”]\s*failed|$)")
_QUOTED_COND = _regex_cache.compile(r"[`‘“]([^`’”]{3,}?)[`'’”]")  # the condition of a translated assert line, without `Assertion`
_FUZZY_LINE = _regex_cache.compile(r":(\d+)(?=[,/\]:]|$)")


class AssertTree(FieldTransformer):
    """kernel_assert.lark's tree to a KernelAssert's fields."""

    def triple(self, children: list[Token]) -> tuple[int, int, int]:
        a, b, c = (int(t) for t in children)
        return (a, b, c)

    def path(self, children: list[Token]) -> Fields:
        return {"path": str(children[0]), "kernel_file": basename(str(children[0]))}

    def condition(self, children: list[Token]) -> Fields:
        """Its quotes dropped; a condition cut off before its closing quote keeps what is there."""
        cond = str(children[0]).strip()
        cond = cond[1:-1] if len(cond) >= 2 and cond[-1] in "`'\"’”" else cond[1:]
        return {"condition": cond.strip()}


def kernel_assert(tree: Tree, line: Line) -> KernelAssert:
    return KernelAssert(**read_at(line), **AssertTree().transform(tree), source="printf")


def clean_condition(cond: str) -> str:
    """Strip what interleaved device printf glued onto a condition."""
    cond = cond.strip()
    quotes = [m.end() for m in re.finditer(r'"[^"]*"', cond)]
    if quotes and quotes[-1] < len(cond):
        cond = cond[: quotes[-1]]
    cond = re.split(r"\s*[:：]\s*block\s*[:：]|\]\s*,\s*thread", cond)[0]
    return cond.strip()


def _triples(coords: re.Match[str]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The block and thread of a `_COORD` match."""
    a, b, c, d, e, f = (int(g) for g in coords.groups())
    return (a, b, c), (d, e, f)


def fuzzy_assert(line: Line) -> KernelAssert | None:
    """Best effort for lines mangled by concurrent device printf: file, condition, coordinates."""
    text = line.text.replace("【", "[").replace("】", "]")
    cond = _FUZZY_COND.search(text) or _QUOTED_COND.search(text)
    files = _FUZZY_FILE.findall(text)
    coords = _COORD.search(text)
    if not files or not (cond or coords):
        return None
    block, thread = _triples(coords) if coords else (None, None)
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
        block=block,
        thread=thread,
        source="fuzzy",
    )


def group_asserts(records: list[Record]) -> list[Record]:
    """Collapse the one-line-per-thread assert flood into one record per site."""
    out: list[Record] = []
    groups: dict[tuple, KernelAssert] = {}
    blocks: dict[tuple, set] = {}
    threads: dict[tuple, set] = {}
    fuzzy: list[KernelAssert] = []
    whole = _whole_names(records)
    for rec in records:
        if not isinstance(rec, KernelAssert):
            out.append(rec)
            continue
        if rec.source == "fuzzy":
            fuzzy.append(rec)
            continue
        full = whole.get((rec.kernel_line, rec.condition), rec.kernel_file)
        if full != rec.kernel_file and full.endswith(rec.kernel_file):  # a paste that began mid-name
            rec = rec.model_copy(update={"kernel_file": full, "path": full})
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


def _whole_names(records: list[Record]) -> dict[tuple, str]:
    """The longest file name each assertion site (line, condition) is printed with."""
    names: dict[tuple, str] = {}
    for rec in records:
        if isinstance(rec, KernelAssert) and rec.source != "fuzzy":
            key = (rec.kernel_line, rec.condition)
            if len(rec.kernel_file) > len(names.get(key, "")):
                names[key] = rec.kernel_file
    return names


def _first_index(records: list[Record], first_line: int) -> int:
    for i, rec in enumerate(records):
        if rec.first_line > first_line:
            return i
    return len(records)


def _merge_fuzzy(fuzzy: list[KernelAssert], groups: dict[tuple, KernelAssert]) -> KernelAssert | None:
    conds = Counter(f.condition for f in fuzzy if f.condition)
    sightings = Counter(f.kernel_file for f in fuzzy)
    # a name cut at its start (`exKernel.cu`, a paste that began mid-name) is a sighting of the whole one
    files = Counter({name: sum(n for other, n in sightings.items() if name.endswith(other)) for name in sightings})
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


_FILE_NAME = _regex_cache.compile(r"^[\w\-.]+\.\w+$|^unknown$")


def _plausible(rec: KernelAssert) -> bool:
    """A strict parse of an interleaved line can still pick up garbage; reject such parses."""
    if not _FILE_NAME.match(rec.kernel_file) or rec.condition != clean_condition(rec.condition):
        return False
    return not (rec.function and re.search(r"[:：]\d+[:：]|block\s*:", rec.function))


def _word_starts(text: str, limit: int = 6) -> list[int]:
    """Where the assert's location may begin: the line's start, or a word after what was glued before it."""
    return [0, *(m.end() for m in _SPACE_RUN.finditer(text, 1, max(1, text.find("block"))))][:limit]


_SPACE_RUN = _regex_cache.compile(r"\s+")


class KernelAssertReader(Reader):
    """Takes an assert line as its own: the flood of one line per failing thread is no one's message."""

    order = 20

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        self.asserts = 0
        # an assert line read, by its text without its coordinates: the flood's other threads differ only there
        self.by_shape: dict[str, KernelAssert] = {}

    def read(self, line: Line) -> bool:
        text = line.text
        # a translated page may have lost the word `Assertion`: a kernel file with block/thread coordinates is one
        # (the plain texts first: most lines hold neither, and `Assertion failed` is itself the hint)
        if "block" in text:
            if _ASSERT_HINT.search(text) or (_COORD.search(text) and _FUZZY_FILE.search(text)):
                return self.assertion(line)
        elif "Assertion failed" in text:
            return self.assertion(line)
        return False

    @classmethod
    def settle(cls, records: list[Record]) -> list[Record]:
        return group_asserts(records)

    def assertion(self, line: Line) -> bool:
        self.asserts += 1
        text = line.text.strip()
        if self.asserts > MAX_ASSERT_PARSES:
            rec = fuzzy_assert(line)
            if rec is not None:
                rec.source = "printf" if _COORD.search(text) else "fuzzy"
                self.sink.emit(rec)
                return True
            return False
        coords = _COORD.search(text)
        shape = f"{text[: coords.start()]}\0{text[coords.end() :]}" if coords else ""
        seen = self.by_shape.get(shape)
        if seen is not None and coords is not None:  # another thread of an assert read: its coordinates are the news
            block, thread = _triples(coords)
            self.sink.emit(seen.model_copy(update={**read_at(line), "block": block, "thread": thread}))
            return True
        tree = next(filter(None, (parse("kernel_assert", text[k:]) for k in _word_starts(text))), None)
        if tree is not None:
            rec = kernel_assert(tree, line)
            if _plausible(rec):
                self.sink.emit(rec)
                # kept where the grammar read the coordinates the search found: then they are all that can differ
                if coords is not None and _triples(coords) == (rec.block, rec.thread) and len(self.by_shape) < MAX_SHAPES:
                    self.by_shape[shape] = rec
                return True
        rec = fuzzy_assert(line)
        if rec is not None:
            self.sink.emit(rec)
            return True
        return False
