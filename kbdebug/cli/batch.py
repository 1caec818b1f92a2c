"""Many logs at once: eight ranks of one job, a night of failed CI runs, a bot's inbox.

Directories and globs are expanded, the logs are diagnosed in order (in worker processes when there
are enough of them to pay for the workers' start), and the crashes are grouped by signature, so the
question "how many different problems is this?" has an answer.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kbdebug.diagnosis import Diagnosis

PARALLEL_MIN = 48  # below this many logs, starting workers (each imports kbdebug) costs more than it saves
MAX_WORKERS = 8


def expand(args: list[str]) -> list[str]:
    """Files as given; a directory's files (recursively, hidden ones skipped); a glob's matches. Sorted, unique."""
    out: list[str] = []
    for arg in args:
        if arg == "-":
            out.append(arg)
        elif os.path.isdir(arg):
            out += sorted(
                str(p) for p in Path(arg).rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(arg).parts)
            )
        elif any(ch in arg for ch in "*?[") and not os.path.exists(arg):
            out += sorted(p for p in glob.glob(arg, recursive=True) if os.path.isfile(p))
        else:
            out.append(arg)
    return list(dict.fromkeys(out))


SNIFF = 8192
# Archives and serialised objects that sit beside logs in a run directory: torch.save's zip, a pickle,
# gzip, an executable or shared object, images. Their first bytes say so whatever the file is named.
_MAGIC: tuple[bytes, ...] = (
    b"PK\x03\x04",
    b"\x80\x02",
    b"\x80\x03",
    b"\x80\x04",
    b"\x80\x05",
    b"\x1f\x8b",
    b"\x7fELF",
    b"\x89PNG",
    b"\xff\xd8\xff",
)
_MAGIC += (b"\x93NUMPY",)
_TEXT_CONTROLS = set(b"\t\n\r\x0b\x0c\x08\x1b")  # whitespace, backspace (progress bars), ESC (colours)


def is_text_log(path: str) -> bool:
    """Whether a file found in a directory reads as a log: its first bytes carry no binary format's
    signature and at most a few percent of control bytes (a damaged log has some; a checkpoint has many)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF)
    except OSError:
        return True  # reading it fails again where the error is reported
    if head.startswith(_MAGIC):
        return False
    controls = sum(1 for b in head if b < 0x20 and b not in _TEXT_CONTROLS)
    return controls <= len(head) // 20


def _diagnose_file(args: tuple[str, list[Path] | None]) -> Diagnosis:
    from kbdebug.api import explain

    path, kb_dirs = args
    return explain(path, kb_dirs=kb_dirs)


def diagnose_files(paths: list[str], kb_dirs: list[Path] | None = None, jobs: int | None = None) -> Iterator[Diagnosis]:
    """Each file's diagnosis, in the order given, as soon as it and those before it are done (the caller counts
    them for its progress bar)."""
    workers = min(jobs or os.cpu_count() or 1, MAX_WORKERS)
    work = [(p, kb_dirs) for p in paths]
    if len(paths) >= PARALLEL_MIN and workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            yield from pool.map(_diagnose_file, work, chunksize=8)
        return
    for item in work:
        yield _diagnose_file(item)
