"""The guides are Markdown: one parser (markdown-it-py) turns them into HTML, plain text or terminal styling.

Hand-written regexes over backticks broke on nested code and links; a CommonMark parser does not.
Raw HTML inside a guide is escaped, never passed through: a guide quotes the user's log.

Plain text (`kbdebug explain` into a pipe or a file) is most of what is rendered, and importing the parser
is a fifth of a cold start: `to_plain` reads paragraphs of text and code spans itself (`_simple_plain`),
exactly as the parser would, and hands anything else (emphasis, links, escapes, entities, lists, headings)
to the parser. tests/test_markup.py holds the two to the same output.
"""

from __future__ import annotations

import io
import re
import unicodedata
from functools import cache
from typing import TYPE_CHECKING

from kbdebug import _regex_cache

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
    simple = _simple_plain(text or "")
    return simple if simple is not None else _parsed_plain(text or "")


def _parsed_plain(text: str) -> str:
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


# A line that may open a block other than a paragraph (heading, quote, list, fence, code, thematic break,
# setext underline, link definition, HTML), or characters the parser reads differently (tab, CR, NUL).
_NOT_A_PARAGRAPH = _regex_cache.compile(r"^ {0,3}(?:[#>=\[<]|[-+*_](?: |$|[-*_ ]*$)|\d{1,9}[.)](?: |$)|```|~~~)|^ {4}|[\t\r\x00]", re.M)
_BLANK = _regex_cache.compile(r"\n *\n")
_TICKS = _regex_cache.compile(r"`+")
# outside code spans: escapes, entities, autolinks, and a link's `](` need the parser; `*` and `_` only when
# they can open or close emphasis (`_delimiter_free`)
_INLINE = _regex_cache.compile(r"[\\<]|&[#A-Za-z0-9]|\]\(")
_DELIMS = _regex_cache.compile(r"\*+|_+")
_BREAK = _regex_cache.compile(r" *\n *")
# CommonMark's whitespace and its trim, as markdown-it reads them
_WHITE = frozenset("\t\n\x0b\x0c\r \xa0\u1680\u202f\u205f\u3000") | frozenset(map(chr, range(0x2000, 0x200B)))
_TRIM = "".join(sorted(_WHITE | {"\u2028", "\u2029"}))


def _simple_plain(text: str) -> str | None:
    """`text` as `_parsed_plain` renders it when it is paragraphs of plain text and code spans; else None."""
    if _NOT_A_PARAGRAPH.search(text):
        return None
    paragraphs = []
    for para in _BLANK.split(text):
        if not para.strip(" \n"):  # blank lines only: no paragraph
            continue
        body = _paragraph(para.strip(_TRIM))
        if body is None:
            return None
        paragraphs.append(body)
    return "\n\n".join(paragraphs).strip()


def _paragraph(src: str) -> str | None:
    out: list[str] = []
    pos = 0
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(src)]
    i = 0
    while i < len(runs):
        start, end = runs[i]
        close = next((k for k in range(i + 1, len(runs)) if runs[k][1] - runs[k][0] == end - start), None)
        if close is None:  # an unmatched run is text
            i += 1
            continue
        if not _plain_text(src, pos, start, out):
            return None
        code = src[end : runs[close][0]].replace("\n", " ")
        if code.startswith(" ") and code.endswith(" ") and code.strip(" "):
            code = code[1:-1]
        out.append(code)
        pos = runs[close][1]
        i = close + 1
    if not _plain_text(src, pos, len(src), out):
        return None
    return "".join(out)


def _plain_text(src: str, start: int, end: int, out: list[str]) -> bool:
    """Append src[start:end] (text between code spans) as the parser would; False if it holds markup."""
    part = src[start:end]
    if _INLINE.search(part) or not _delimiter_free(src, start, end):
        return False
    out.append(_BREAK.sub("\n", part))
    return True


def _delimiter_free(src: str, start: int, end: int) -> bool:
    """No run of `*` or `_` in src[start:end] can open or close emphasis (CommonMark's flanking rules,
    read against the whole paragraph as the parser reads them: `snake_case`, `2 * 3` are text)."""
    for m in _DELIMS.finditer(src, start, end):
        last = src[m.start() - 1] if m.start() > 0 else " "
        nxt = src[m.end()] if m.end() < len(src) else " "
        last_white, next_white = last in _WHITE, nxt in _WHITE
        last_punct, next_punct = _punct(last), _punct(nxt)
        left = not (next_white or (next_punct and not (last_white or last_punct)))
        right = not (last_white or (last_punct and not (next_white or next_punct)))
        if m.group()[0] == "*":
            if left or right:
                return False
        elif (left and (not right or last_punct)) or (right and (not left or next_punct)):
            return False
    return True


def _punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith(("P", "S"))
