"""Which frames of a traceback are the user's: the one place that knows library paths.

A leaf module (no kbdebug imports), so the parser, the facts, the live hooks and the verifier
all draw the user/library line in the same place.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from types import FrameType, TracebackType

LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|[\\/]lib[\\/]python\d|^<frozen|^<string>|[\\/]torch[\\/](?:nn|autograd|cuda|utils|_tensor|"
    r"functional|distributed|_dynamo|_inductor|optim|serialization|_utils|_ops|amp|__init__)|^/usr/lib/python"
)


def is_library_path(path: str) -> bool:
    """True for the stdlib, installed packages and torch's own Python files, as printed in a traceback."""
    return bool(LIBRARY_PATH.search(path.replace("\\\\", "\\")))


def basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1]


_PKG_DIR = str(Path(__file__).resolve().parent)


def is_library_file(filename: str) -> bool:
    """A live frame's file that is not the user's: kbdebug itself, the stdlib, installed packages, torch."""
    if filename.startswith(_PKG_DIR) or LIBRARY_PATH.search(filename):
        return True
    return any(filename.startswith(p) for p in _stdlib_prefixes())


@cache
def _stdlib_prefixes() -> tuple[str, ...]:
    import sysconfig

    paths = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(p for p in paths if p)


def user_frame(tb: TracebackType | None) -> FrameType | None:
    """The innermost frame of the traceback outside the stdlib, site-packages, torch and kbdebug."""
    found: FrameType | None = None
    while tb is not None:
        if not is_library_file(tb.tb_frame.f_code.co_filename):
            found = tb.tb_frame
        tb = tb.tb_next
    return found
