"""Which frames of a traceback are the user's: the one place that knows library paths.

A leaf module (no kbdebug imports), so the parser, the facts, the live hooks and the verifier
all draw the user/library line in the same place.
"""

from __future__ import annotations

import re

LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|[\\/]lib[\\/]python\d|^<frozen|^<string>|[\\/]torch[\\/](?:nn|autograd|cuda|utils|_tensor|"
    r"functional|distributed|_dynamo|_inductor|optim|serialization|_utils|_ops|amp|__init__)|^/usr/lib/python"
)


def is_library_path(path: str) -> bool:
    """True for the stdlib, installed packages and torch's own Python files, as printed in a traceback."""
    return bool(LIBRARY_PATH.search(path.replace("\\\\", "\\")))


def basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1]
