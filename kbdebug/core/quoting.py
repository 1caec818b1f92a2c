"""What a guide quotes of an exception's message, one definition for a log's exception and a live one."""

from __future__ import annotations


def quoted_message(message: str) -> str:
    """The message's first line. A text that begins with a newline is a paragraph (transformers writes its import
    errors so; torch 1.x's driver check did too), printed from the line after the exception's type and wrapped over
    lines: its first sentence."""
    lines = message.split("\n")
    if lines[0].strip() or len(lines) == 1:
        return lines[0].strip()
    words: list[str] = []
    for line in lines[1:]:
        if not line.strip():
            if words:
                break
            continue
        words.append(line.strip())
    paragraph = " ".join(words)
    end = paragraph.find(". ")
    return paragraph[: end + 1] if end >= 0 else paragraph
