"""Whether to colour output: only on a terminal, never with NO_COLOR or TERM=dumb."""

from __future__ import annotations

import os
from typing import TextIO


def use_color(stream: TextIO) -> bool:
    try:
        return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
