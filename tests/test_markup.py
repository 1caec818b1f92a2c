"""The plain-text rendering of guides reads paragraphs of text and code spans without the Markdown parser
(kbdebug/render/markup.py `_simple_plain`); whatever it renders must be what the parser renders."""

from __future__ import annotations

import pytest
from conftest import ROOT, explain_in_fresh_process
from hypothesis import given, settings
from hypothesis import strategies as st

from kbdebug.render import markup

EXAMPLE = ROOT / "examples" / "segmentation_crash.log"

# pieces a guide filled with a log's values is made of, and the Markdown around them
PIECES = [
    "word",
    " ",
    " ",
    "\n",
    "  \n",
    "\n\n",
    "`x`",
    "``a`b``",
    "`",
    "` y `",
    "foo_bar",
    "_",
    "__",
    "*",
    "**",
    "a*b",
    "2 * 3",
    "[1, 2]",
    "(x)",
    "[",
    "]",
    "(",
    ")",
    "&",
    "&amp;",
    "<x>",
    "\\",
    "#",
    "- ",
    "1. ",
    "    ",
    "=",
    "!",
    ".",
    ",",
    "x_",
    "_y",
    "CUDA_LAUNCH_BLOCKING=1",
    "é",
    "ü_",
    "—",
    "\u00a0",
    "\u3000",
    "'",
    '"',
    "->",
    ":",
    "~",
    "|",
]


@pytest.mark.parametrize(
    "text",
    [
        "An index `i` out of bounds: `x[idx]` in block [20, 0, 0], thread [8, 0, 0].",
        "Set `CUDA_LAUNCH_BLOCKING=1` and run again;\nthe line shown then is the one that failed.  \nNext line.",
        "a `` b ` c `` d ` unmatched",
        "` spaced `, `  `, ` `, `a\nb`",
        "First paragraph.\n\n  Second, `code`.\n",
        "snake_case_name and 2 * 3",
        "",
        "   ",
    ],
)
def test_plain_text_and_code_spans_read_without_the_parser(text: str) -> None:
    got = markup._simple_plain(text)
    assert got is not None
    assert got == markup._parsed_plain(text)


@pytest.mark.parametrize(
    "text",
    [
        "an invalid __global__ read",  # emphasis: the parser reads `__global__` as bold
        "a *b* c",
        "see [the docs](https://pytorch.org)",
        "escaped \\* star",
        "&lt; entity",
        "<https://example.com>",
        "- a list item",
        "# a heading",
        "    indented code",
        "line\n===",
    ],
)
def test_markup_goes_to_the_parser(text: str) -> None:
    assert markup._simple_plain(text) is None
    assert markup.to_plain(text) == markup._parsed_plain(text)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_the_simple_reading_is_the_parser_s(text: str) -> None:
    got = markup._simple_plain(text)
    if got is not None:
        assert got == markup._parsed_plain(text)


def test_text_explain_needs_no_markdown_parser() -> None:
    """`kbdebug explain` into a pipe renders its guides as plain text: the parser (70 modules) is not imported."""
    _, modules = explain_in_fresh_process("-q", str(EXAMPLE))
    assert "markdown_it" not in modules, "markdown_it imported"
