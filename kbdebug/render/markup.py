"""The guides are Markdown: one parser (markdown-it-py) turns them into HTML, plain text or terminal styling.

Hand-written regexes over backticks broke on nested code and links; a CommonMark parser does not.
Raw HTML inside a guide is escaped, never passed through: a guide quotes the user's log.
"""

from __future__ import annotations

import io
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token


@cache
def _md() -> MarkdownIt:
    from markdown_it import MarkdownIt  # imported on the first guide rendered as text or HTML: JSON never pays it

    return MarkdownIt("commonmark", {"html": False, "linkify": False})


def to_html(text: str) -> str:
    """Block HTML (`<p>`, `<ul>`, `<code>`, `<a>`) for a guide section."""
    return _md().render(text or "")


def to_html_inline(text: str) -> str:
    """One line of Markdown as inline HTML (no wrapping `<p>`)."""
    return _md().renderInline(text or "")


def _inline_plain(children: list[Token]) -> str:
    out: list[str] = []
    href: list[str] = []
    for tok in children:
        if tok.type in ("text", "code_inline"):
            out.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif tok.type == "link_open":
            href.append(str(tok.attrs.get("href", "")))
        elif tok.type == "link_close" and href:
            url = href.pop()
            out.append(f" ({url})" if url and not "".join(out).endswith(url) else "")
    return "".join(out)


def to_plain(text: str) -> str:
    """Clean text for a pipe: code without backticks, links as `text (url)`, list items as `- `."""
    lines: list[str] = []
    depth = 0
    item_start = False
    for tok in _md().parse(text or ""):
        if tok.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif tok.type == "list_item_open":
            item_start = True
        elif tok.type == "inline":
            body = _inline_plain(tok.children or [])
            if depth and item_start:
                body = "  " * (depth - 1) + "- " + body.replace("\n", "\n" + "  " * depth)
                item_start = False
            lines.append(body)
        elif tok.type in ("fence", "code_block"):
            lines.append("\n".join("    " + ln for ln in tok.content.rstrip("\n").split("\n")))
        elif tok.type == "paragraph_close" and not depth:
            lines.append("")
    return "\n".join(lines).strip()


def to_terminal(text: str, width: int = 100) -> str:
    """The guide styled by rich (code, bold, lists) for a TTY; ANSI codes included."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.theme import Theme

    buf = io.StringIO()
    # rich's default paints code spans bold cyan on black: a black box on a light terminal. Code keeps the
    # terminal's own background, so it reads on any.
    theme = Theme({"markdown.code": "bold cyan", "markdown.code_block": "cyan"})
    console = Console(file=buf, force_terminal=True, width=width, color_system="standard", highlight=False, theme=theme)
    console.print(Markdown(text or "", code_theme="ansi_dark", hyperlinks=False), end="")
    return "\n".join(line.rstrip() for line in buf.getvalue().rstrip("\n").split("\n"))
