"""How to write to the terminal: colour only on a TTY (never with NO_COLOR or TERM=dumb), and at what width."""

from __future__ import annotations

import os
import shutil
from typing import TextIO


def use_color(stream: TextIO) -> bool:
    try:
        return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


PIPED_WIDTH = 100  # piped output keeps one stable width, whatever terminal the pipeline was started in


def output_width(stream: TextIO) -> int:
    """The terminal's width on a TTY (COLUMNS honoured, as rich does); a stable width when piped."""
    try:
        if stream.isatty():
            return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
    except (AttributeError, ValueError):
        pass
    return PIPED_WIDTH
