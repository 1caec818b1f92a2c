"""Library entry points. Nothing here imports torch: a log is diagnosed from its text alone."""

from __future__ import annotations

from pathlib import Path

from kbdebug.diagnosis import Diagnosis
from kbdebug.kb import load_kb
from kbdebug.kb.matcher import diagnose_records
from kbdebug.parse import parse_regions
from kbdebug.render import fill
from kbdebug.scan import Region, Scanner, scan_stream, scan_text


def diagnose_regions(regions: list[Region], source: str = "-", kb_dirs: list[Path] | None = None) -> Diagnosis:
    kb = load_kb(kb_dirs)
    records = parse_regions(regions)
    return fill(diagnose_records(records, kb, source), kb)


def diagnose_text(text: str, *, source: str = "-", kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a log held in memory."""
    return diagnose_regions(scan_text(text), source, kb_dirs)


def explain(path: str | Path, *, kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a log file of any size; it is streamed, never read whole."""
    with open(path, "rb") as fh:
        return diagnose_regions(scan_stream(fh), str(path), kb_dirs)


__all__ = ["Diagnosis", "Scanner", "diagnose_regions", "diagnose_text", "explain"]
