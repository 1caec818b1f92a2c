"""compute-sanitizer / cuda-memcheck reports: one header line per error and its detail lines
(location, thread and block, address, allocation, device and host frames), and the summaries."""

from __future__ import annotations

import re

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at, to_int, triple
from kbdebug.parse.grammar import first_alt, parse, token, tokens
from kbdebug.records import SanitizerFrame, SanitizerReport, SanitizerSummary

_TOOLKIT_PATH = re.compile(r"(?:^|[\\/])cuda[^\\/]*[\\/](?:[^\\/]+[\\/])*include[\\/]|(?:^|[\\/])sm_\d+_intrinsics", re.I)
_SAN_TOOL_OPT = re.compile(r"(compute-sanitizer|cuda-memcheck)\b[^\n]{0,400}?--tool[ =](\w+)")
_SAN_CMD = re.compile(r"(?:^|[\s$])(compute-sanitizer|cuda-memcheck)\s")
_LOC_NEW = re.compile(r"^(?P<func>.+?)(?P<pc>\+0x[0-9a-fA-F]+)(?: in (?P<file>.+?):(?P<line>\d+))?\s*$")
_LOC_OLD_FILE = re.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in (?P<file>(?:[A-Za-z]:)?[^:]+?):(?P<line>\d+):(?P<func>.+)$")
_LOC_OLD = re.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in (?P<func>.+?)\s*$")
_LOC_COLON = re.compile(r"^(?P<func>.+?):(?P<pc>0x[0-9a-fA-F]+)(?: in (?P<file>.+?):(?P<line>\d+))?$")
_LOC_FILEFUNC = re.compile(r"^(?P<file>(?:[A-Za-z]:)?[^:\s]+?):(?P<line>\d+):(?P<func>.+?)(?: \(.*: 0x[0-9a-f]+\))?$")
_LOC_OLDFRAME = re.compile(r"^(?P<func>.+?) \((?:.*) : (?P<pc>0x[0-9a-fA-F]+)\)$")
_HAZARDS = re.compile(r"(?<!\s)\s*\[(\d+) hazards?\]\s*$")


def location(text: str) -> SanitizerFrame:
    text = text.strip()
    hz = _HAZARDS.search(text)
    if hz:
        text = text[: hz.start()]
    for rx in (_LOC_OLD_FILE, _LOC_NEW, _LOC_COLON, _LOC_FILEFUNC, _LOC_OLD, _LOC_OLDFRAME):
        m = rx.match(text)
        if m:
            d = m.groupdict()
            return SanitizerFrame(
                function=(d.get("func") or "").strip() or None, file=d.get("file"), line=to_int(d.get("line")), module=d.get("pc")
            )
    return SanitizerFrame(function=text or None)


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


class SanitizerReader(State):
    def sanitizer(self, line: Line, body: str) -> None:
        tree = parse("sanitizer", body) if body.strip() else None
        if tree is None:
            return
        alt = first_alt(tree)
        kind = alt.data
        base = read_at(line)
        tool = self.san_tool
        if kind == "banner":
            self.san_tool = "cuda-memcheck" if "MEMCHECK" in body else "compute-sanitizer"
            return
        header = {
            "invalid_access": ("memcheck", "invalid_access"),
            "uninitialized": ("initcheck", "uninitialized"),
            "host_api": ("initcheck", "host_api_access"),
            "unused": ("initcheck", "unused_memory"),
            "barrier": ("synccheck", "barrier"),
            "wgmma": ("synccheck", "wgmma"),
            "malloc_free": ("memcheck", "malloc_free"),
            "api_error": (None, "api_error"),
            "leaked": ("leakcheck", "leak"),
            "race": ("racecheck", "race"),
            "hazard": ("racecheck", "hazard"),
        }
        if kind in header:
            check, category = header[kind]
            if check is None:
                check = self.san_check if self.san_check in ("memcheck", "racecheck", "initcheck", "synccheck") else "memcheck"
            if kind == "invalid_access" and token(alt, "POTENTIAL"):
                check = "racecheck"
            rec = SanitizerReport(**base, tool=tool, check=check, category=category)  # type: ignore[arg-type]
            rec.memory_space = token(alt, "SPACE")
            rec.access = token(alt, "ACCESS")
            if kind in ("invalid_access", "uninitialized", "host_api", "leaked", "unused"):
                rec.access_size_bytes = to_int(token(alt, "NUMBER"))
            if kind == "uninitialized":
                rec.memory_space = rec.memory_space or "__global__"
            if kind in ("host_api", "leaked", "unused"):
                rec.address = token(alt, "HEX")
            if kind == "barrier":
                rec.severity = (token(alt, "BARRIER_CLASS") or "").strip(" .") or None
            if kind == "malloc_free":
                rec.severity = (token(alt, "REST") or "").strip()
            if kind == "api_error":
                rec.api_error = token(alt, "API_ERR")
                rec.api_code = to_int(token(alt, "INT"))
                q = token(alt, "QUOTED")
                rec.api_message = q[1:-1] if q else None
                rec.api_call = (token(alt, "API_NAME") or "").rstrip(".") or None
            if kind in ("race", "hazard"):
                rec.severity = (token(alt, "SEVERITY") or "").rstrip(":")
                rec.memory_space = "__shared__"
                rec.access = (token(alt, "RW") or "").lower() or None
                if kind == "race":
                    self._set_location(rec, location(token(alt, "LOCATION") or ""))
                    hz = _HAZARDS.search(token(alt, "LOCATION") or "")
                    rec.hazards = int(hz.group(1)) if hz else None
                else:
                    rec.hazard_type = token(alt, "HAZARD")
                    rec.address = token(alt, "HEX")
                    coords = token(alt, "COORDS")
                    rec.block = triple(coords) if coords else None
            if tool is None:
                rec.tool = self._guess_tool(body)  # type: ignore[assignment]  # the tool names the grammar knows
            self.san = rec
            self.out.append(rec)
            return
        cur = self.san
        if kind in ("error_summary", "leak_summary", "race_summary"):
            ints = [to_int(t) for t in tokens(alt, "INT")]
            summ = SanitizerSummary(**base, tool=tool)
            if kind == "error_summary":
                summ.errors = ints[0]
            elif kind == "leak_summary":
                summ.leaked_bytes, summ.leaked_allocations = ints[0], ints[1]
            else:
                summ.hazards = ints[0]
            self.out.append(summ)
            self.san = None
            return
        if cur is None:
            return
        rec = cur
        rec.last_line = line.no
        rec.raw += "\n" + line.text
        if kind == "at":
            loc = location(token(alt, "LOCATION") or "")
            self._set_location(rec, loc)
            if rec.tool is None or self.san_tool is None:
                if re.match(r"0x[0-9a-fA-F]{8}\b", (token(alt, "LOCATION") or "").strip()):
                    rec.tool = "cuda-memcheck"
        elif kind == "by_thread":
            pair = tokens(alt, "COORDS")
            rec.thread, rec.block = triple(pair[0]), triple(pair[1])
        elif kind == "address":
            rec.address = token(alt, "HEX")
            rec.address_phrase = token(alt, "PHRASE")
        elif kind == "allocation":
            rec.allocation = (token(alt, "ALLOC_TEXT") or "").strip()
        elif kind == "device_frame":
            loc = location(token(alt, "LOCATION") or "")
            rec.device_frames.append(loc)
            if loc.file and (rec.file is None or _TOOLKIT_PATH.search(rec.file)) and not _TOOLKIT_PATH.search(loc.file):
                rec.file, rec.line = loc.file, loc.line
        elif kind == "host_frame":
            rest = (token(alt, "REST") or "").strip()
            rec.host_frames.append(_host_frame(rest))
            if re.search(r"\(.+ \+ 0x[0-9a-f]+\) \[0x", rest) and self.san_tool is None:
                rec.tool = "cuda-memcheck"
        elif kind == "module_line":
            if rec.host_frames and rec.host_frames[-1].module is None:
                rec.host_frames[-1].module = (token(alt, "MODULE") or "").strip()
        elif kind == "hazard_access":
            loc = location(token(alt, "LOCATION") or "")
            if rec.function is None:
                self._set_location(rec, loc)
                rec.thread = triple(token(alt, "COORDS") or "0,0,0")
        elif kind == "uninit_access":
            by = (token(alt, "REST") or "").split()
            rec.api_call = by[0] if by else None
        elif kind == "and_access":
            hz = _HAZARDS.search(token(alt, "LOCATION") or "")
            if hz:
                rec.hazards = (rec.hazards or 0) + int(hz.group(1))

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
