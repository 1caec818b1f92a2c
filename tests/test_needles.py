"""The scanner's needles come from the grammars: every line that opens a record holds one."""

from __future__ import annotations

import pytest

from kbdebug.parse import parse_text
from kbdebug.parse.needles import cover, needles
from kbdebug.phrases import required_texts
from kbdebug.scan import WHOLE, scan_bytes

# One opening line of each format, as the tools print them (none is one of the grammars' literals verbatim).
OPENERS = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8 GiB",
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total capacity)",
    "/w/aten/src/ATen/native/cuda/Loss.cu:250: nll: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0` failed.",
    "========= Invalid __global__ read of size 4 bytes",
    "[E ProcessGroupNCCL.cpp:458] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 1 milliseconds before timing out.",
    "Root Cause (first observed failure):",
    "StopIteration: generator raised",
    "main.cu:41: cuda error 700: an illegal memory access was encountered",
    "terminate called after throwing an instance of 'c10::Error'",
]


@pytest.mark.parametrize("line", OPENERS)
def test_every_opening_line_holds_a_needle_and_is_found_in_a_large_log(line: str) -> None:
    assert any(n in line.encode() for n in needles()), line
    filler = b"epoch 3 step 120 loss 0.4312 lr 1e-4 it/s 54.2\n" * (2 * WHOLE // 48)  # no needle: skipped
    regions = scan_bytes(filler + line.encode() + b"\n" + filler, needles)
    assert [ln.text for r in regions for ln in r.lines if ln.text == line] == [line]
    assert parse_text(line), line


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
