"""The scanner's needles come from the grammars: every line that opens a record holds one."""

from __future__ import annotations

import pytest
from grammar_cases import CASES

from kbdebug.core.phrases import required_texts
from kbdebug.parse.derive import cover, openers
from kbdebug.parse.needles import needles
from kbdebug.parse.regions import parse_text
from kbdebug.parse.sources import names
from kbdebug.scan import WHOLE, scan_bytes

# Every case line of a kind that opens a record (`// scan for:` in its grammar): the scanner must find it.
OPENERS = sorted({line for grammar, kind, line in CASES if kind in openers(grammar)})


@pytest.mark.parametrize("line", OPENERS)
def test_every_opening_line_holds_a_needle_and_is_found_in_a_large_log(line: str) -> None:
    assert any(n in line.encode() for n in needles()), line
    filler = b"epoch 3 step 120 loss 0.4312 lr 1e-4 it/s 54.2\n" * (2 * WHOLE // 48)  # no needle: skipped
    regions = scan_bytes(filler + line.encode() + b"\n" + filler, needles)
    at = filler.count(b"\n") + 1  # the opener's line number: the scanner kept it
    assert [ln.no for r in regions for ln in r.lines if ln.no == at] == [at], line
    assert parse_text(line), line


def test_every_format_has_opening_cases() -> None:
    assert {g for g, kind, _ in CASES if kind in openers(g)} >= {g for g in names() if openers(g)}


def test_ordinary_progress_lines_hold_no_needle() -> None:
    """Needles are rare text: a training loop's own output is skipped, not read."""
    for line in [
        "Epoch 12/100 iteration 3400 duration 1.2s loss=0.123 accuracy=0.91",
        "Saving checkpoint to ./ckpt/epoch_12.pt",
        "step 100 | loss = 0.4312 | lr 1e-4 | grad norm 3.2",
    ]:
        assert not any(n in line.encode() for n in needles()), line


def test_required_texts_of_a_regex() -> None:
    assert required_texts(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b") == {"Error", "Exception"}
    assert required_texts(r"\w+") is None
    assert required_texts(r"(?i)cuda error") is None  # case-blind: no one text to search for
    assert required_texts(r"Loss is (?:nan|inf)") == {"Loss is nan", "Loss is inf"}


def test_cover_finds_every_text_with_few_needles() -> None:
    texts = {b"RuntimeError", b"ValueError", b"Traceback (most recent call last)", b"========="}
    chosen = cover(texts)
    assert all(any(n in t for n in chosen) for t in texts)
    assert len(chosen) == 3
