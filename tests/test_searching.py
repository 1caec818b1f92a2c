"""kbdebug.core.searching asks the RE2 engine directly: it answers what the binding's `search` and `finditer` answer,
on every text (ASCII or not) and pattern (empty matches included), and on Python's engine as well."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from kbdebug.core.phrases import literal_finder
from kbdebug.core.searching import finds, starts
from kbdebug.kb.patterns import compile_pattern

PATTERNS = ["a|ab|b", "x*", "", "é+", "[0-9]+", "(?i)cuda error", "b?", "(?:ab)+|é"]
TEXTS = st.text(alphabet="abxé09 CUDAcudaerror\n：", max_size=40)


@given(TEXTS, st.sampled_from(PATTERNS))
def test_the_engine_answers_as_the_binding(text: str, pattern: str) -> None:
    for rx in (compile_pattern(pattern), re.compile(pattern)):
        assert finds(rx, text) == (rx.search(text) is not None)
        assert list(starts(rx, text)) == [m.start() for m in rx.finditer(text)]


@given(TEXTS)
def test_fixed_texts_start_where_the_binding_finds_them(text: str) -> None:
    finder = literal_finder(["cuda", "cuda error", "ab", "é0", "："])
    assert list(starts(finder, text)) == [m.start() for m in finder.finditer(text)]
    assert finds(finder, text) == (finder.search(text) is not None)
