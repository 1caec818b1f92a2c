"""compute-sanitizer / cuda-memcheck reports: one header line per error and its detail lines
(location, thread and block, address, allocation, device and host frames), and the summaries."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lark import Token

from kbdebug import _regex_cache
from kbdebug.normalise import Line
from kbdebug.parse.derive import anchors, templates
from kbdebug.parse.fields import Fields, FieldTransformer, merge, unquote
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, Sink, read_at
from kbdebug.records import Frame, SanitizerFrame, SanitizerReport, SanitizerSummary

_TOOLKIT_PATH = _regex_cache.compile(r"(?:^|[\\/])cuda[^\\/]*[\\/](?:[^\\/]+[\\/])*include[\\/]|(?:^|[\\/])sm_\d+_intrinsics", re.I)
_SAN_TOOL_OPT = _regex_cache.compile(r"(compute-sanitizer|cuda-memcheck)\b[^\n]{0,400}?--tool[ =](\w+)")
_SAN_CMD = _regex_cache.compile(r"(?:^|[\s$])(compute-sanitizer|cuda-memcheck)\s")


class LocationTree(FieldTransformer):
    """sanitizer_location.lark's tree to a SanitizerFrame's fields (the pc is kept in `module`, as printed)."""

    def hazards(self, children: list[Token]) -> Fields:
        return {"hazards": int(children[0])}

    def frame_pc(self, children: list[Token]) -> Fields:
        return {"pc": str(children[0]).rsplit(":", 1)[-1].strip(" )")}


def location(text: str) -> tuple[SanitizerFrame, int | None]:
    """A report's code location and racecheck's hazard count; unread text is kept whole as the function."""
    tree = parse("sanitizer_location", text.strip()) if text.strip() else None
    if tree is None:
        return SanitizerFrame(function=text.strip() or None), None
    f = LocationTree().transform(tree)
    return SanitizerFrame(function=f.get("function"), file=f.get("file"), line=f.get("line"), module=f.get("pc")), f.get("hazards")


def triple(text: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in re.findall(r"\d+", text)[:3])
    return (a, b, c)


def _host_frame(rest: str) -> SanitizerFrame:
    m = re.match(r"^(?P<module>.+?) \((?P<sym>.+) \+ 0x[0-9a-f]+\) \[0x[0-9a-f]+\]$", rest)
    if m:
        return SanitizerFrame(function=m.group("sym"), module=m.group("module"))
    m = re.match(r"^(?P<sym>.*?)\s*\[0x[0-9a-f]+\](?: in (?P<module>.+))?$", rest)
    if m:
        return SanitizerFrame(function=m.group("sym") or None, module=m.group("module"))
    m = re.match(r"^(?P<module>\S+) \[0x[0-9a-f]+\]$", rest)
    if m:
        return SanitizerFrame(module=m.group("module"))
    return SanitizerFrame(function=rest or None)


_CHECKS = ("memcheck", "racecheck", "initcheck", "synccheck", "leakcheck")


class SanitizerTree(FieldTransformer):
    """sanitizer.lark's tree to the kind of report line and its SanitizerReport fields. A header line
    sits under the rule of its check (`memcheck: invalid_access | ...`), and its rule is the category."""

    grammar = "sanitizer"

    def __init__(self) -> None:
        super().__init__()
        self.categories = frozenset().union(*(templates("sanitizer", c) for c in (*_CHECKS, "api_check")))

    def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
        if data in _CHECKS:
            return {"check": str(data), **merge(children)}
        if data == "api_check":
            return {"check": None, **merge(children)}
        if data in self.categories:
            return {"category": str(data), **merge(children)}
        return super().__default__(data, children, meta)

    def block(self, children: list[Token]) -> Fields:
        return {"block": triple(str(children[0]))}

    def thread(self, children: list[Token]) -> Fields:
        return {"thread": triple(str(children[0]))}

    def severity(self, children: list[Token]) -> Fields:
        return {"severity": str(children[0]).rstrip(":")}

    def barrier_class(self, children: list[Token]) -> Fields:
        return {"severity": str(children[0]).strip(" .") or None}

    def malloc_error(self, children: list[Token]) -> Fields:
        return {"severity": str(children[0]).strip()}

    def access(self, children: list[Token]) -> Fields:
        return {"access": str(children[0]).lower()}

    def api_error_name(self, children: list[Token]) -> Fields:
        return {"api_error": str(children[0])}

    def api_message(self, children: list[Token]) -> Fields:
        return {"api_message": unquote(str(children[0]), '"')}

    def api_call(self, children: list[Token]) -> Fields:
        return {"api_call": str(children[0]).rstrip(".") or None}

    def location(self, children: list[Token]) -> Fields:
        frame, hazards = location(str(children[0]))
        return {"location": frame, "hazards": hazards}

    device_location = other_location = location

    def host_location(self, children: list[Token]) -> Fields:
        return {"host_location": _host_frame(str(children[0]).strip())}


# cuda-memcheck's host frame leads with the module and names the symbol with its offset: `Host Frame:/lib/libcuda.so.1
# (cuLaunchKernel + 0x2fe) [0x2d725e]`; compute-sanitizer 2024+ puts the module last, `Host Frame: f [0x6a578] in libf.so`,
# and 2020-2023 on the next line, `in /lib/libf.so` (sanitizer-format.md, host frames). Other frames say neither.
_MEMCHECK_HOST_FRAME = _regex_cache.compile(r"\([^()]* \+ 0x[0-9a-fA-F]+\) \[0x")
_SANITIZER_HOST_FRAME = _regex_cache.compile(r"\[0x[0-9a-fA-F]+\] in \S")


class SanitizerReader(Reader):
    """Takes every line after the tool's `=========` prefix as its own; the tool and its check are also read
    from the command line that ran it (`compute-sanitizer --tool racecheck python train.py`)."""

    order = 10
    ends_messages = True

    def __init__(self, sink: Sink, frames: Sequence[Frame] = ()) -> None:
        super().__init__(sink, frames)
        self.san: SanitizerReport | None = None
        self.san_tool: str | None = None
        self.san_check: str | None = None

    def read(self, line: Line) -> bool:
        text = line.text
        san = anchors("sanitizer").starts(text, 1)
        # the tool's `=========` begins its every line: a line that begins so is the tool's (or a border of
        # `=`), one that holds it further on only when what follows reads as the tool's (a glued paste)
        if san and (self.sanitizer(line, text[san[0] :]) or not text[: san[0]].strip()):
            return True
        # (both name the tool: a line that does not is searched no further)
        m = (_SAN_TOOL_OPT.search(text) or _SAN_CMD.search(text)) if "compute-sanitizer" in text or "cuda-memcheck" in text else None
        if m:
            self.san_tool = m.group(1)
            if m.lastindex and m.lastindex >= 2:
                self.san_check = m.group(2)
        return False

    def sanitizer(self, line: Line, text: str) -> bool:
        """Read a line of the tool's; False when it is none."""
        tree = parse("sanitizer", text)
        if tree is None:
            return False
        body = text.lstrip("=").strip()  # after the tool's prefix
        f = SanitizerTree().read(tree)
        kind = f.pop("template")
        if kind == "banner":
            self.san_tool = "cuda-memcheck" if "MEMCHECK" in body else "compute-sanitizer"
        elif "category" in f:
            self._report(line, body, f)
        elif kind in ("error_summary", "leak_summary", "race_summary"):
            f.pop(kind, None)
            self.sink.emit(SanitizerSummary(**read_at(line), tool=self.san_tool, **f))
            self.san = None
        elif self.san is not None:
            self._detail(line, kind, f)
        return True

    def _report(self, line: Line, body: str, f: Fields) -> None:
        """An error's first line opens a report; its check comes from the grammar, or from --tool for API errors."""
        if f["check"] is None:
            f["check"] = self.san_check if self.san_check in _CHECKS[:4] else "memcheck"
        if f["category"] == "uninitialized":
            f["memory_space"] = f.get("memory_space") or "__global__"
        if f["category"] in ("race", "hazard"):
            f["memory_space"] = "__shared__"
        loc = f.pop("location", None)
        rec = SanitizerReport(**read_at(line), tool=self.san_tool or self._guess_tool(body), **f)  # type: ignore[arg-type]
        if loc is not None:
            self._set_location(rec, loc)
        self.san = rec
        self.sink.emit(rec)

    def _detail(self, line: Line, kind: str, f: Fields) -> None:
        """A detail line extends the report open above it."""
        rec = self.san
        assert rec is not None
        rec.last_line = line.no
        rec.raw += "\n" + line.text
        loc: SanitizerFrame | None = f.get("location")
        if kind == "at" and loc is not None:
            self._set_location(rec, loc)
            if (rec.tool is None or self.san_tool is None) and re.match(r"0x[0-9a-fA-F]{8}\b", loc.module or ""):
                rec.tool = "cuda-memcheck"  # only cuda-memcheck printed a bare 8-digit pc before `in`
        elif kind == "by_thread":
            rec.thread, rec.block = f["thread"], f["block"]
        elif kind == "address_line":
            rec.address, rec.address_phrase = f["address"], f.get("address_phrase")
        elif kind == "allocation_line":
            rec.allocation = f["allocation"]
        elif kind == "device_frame" and loc is not None:
            rec.device_frames.append(loc)
            if loc.file and (rec.file is None or _TOOLKIT_PATH.search(rec.file)) and not _TOOLKIT_PATH.search(loc.file):
                rec.file, rec.line = loc.file, loc.line
        elif kind == "host_frame":
            rec.host_frames.append(f.get("host_location") or SanitizerFrame())
            if self.san_tool is None:  # the frame's layout says which tool printed it
                if _MEMCHECK_HOST_FRAME.search(line.text):
                    rec.tool = "cuda-memcheck"
                elif rec.tool is None and _SANITIZER_HOST_FRAME.search(line.text):
                    rec.tool = "compute-sanitizer"
        elif kind == "module_line":
            if self.san_tool is None and rec.tool is None:  # the module on a line of its own: compute-sanitizer's layout
                rec.tool = "compute-sanitizer"
            if rec.host_frames and rec.host_frames[-1].module is None:
                rec.host_frames[-1].module = f["module"]
        elif kind == "hazard_access" and loc is not None:
            if rec.function is None:
                self._set_location(rec, loc)
                rec.thread = f["thread"]
        elif kind == "uninit_access":
            rec.api_call = f.get("api_call")
        elif kind == "and_access" and f.get("hazards"):
            rec.hazards = (rec.hazards or 0) + f["hazards"]

    def _set_location(self, rec: SanitizerReport, loc: SanitizerFrame) -> None:
        rec.function = loc.function
        rec.pc = loc.module
        if loc.file:
            rec.file, rec.line = loc.file, loc.line

    def _guess_tool(self, body: str) -> str | None:
        if re.search(r"of size \d+\s*$", body):
            return "cuda-memcheck"
        if re.match(r"\s*(?:WARN|ERROR):", body):
            return "cuda-memcheck"
        return "compute-sanitizer" if re.search(r"bytes|Error:|Warning:", body) else None
