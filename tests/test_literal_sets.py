"""kbdebug.core.phrases.LiteralSets: the one pass that tells the formats' anchors which of them may start a
template in a line. It is a filter in front of each anchor's own search, so it must never hide a hit."""

from __future__ import annotations

import pytest

from kbdebug.core.phrases import LiteralSets
from kbdebug.parse.derive import anchors, own_line
from kbdebug.parse.sources import names


def test_a_set_has_a_hit_exactly_where_one_of_its_texts_is() -> None:
    sets = LiteralSets()
    cuda, nccl, empty = sets.add(["CUDA error:", "cudaError"]), sets.add(["NCCL", "Watchdog caught"]), sets.add([])
    assert empty is None  # an empty set rules no line out
    assert sets.hits("RuntimeError: CUDA error: device-side assert triggered") in ({cuda}, None)
    assert sets.hits("[Rank 0] Watchdog caught collective operation timeout") in ({nccl}, None)
    assert sets.hits("epoch 3 loss 0.25") in (frozenset(), None)
    assert sets.hits("a (b) [c] .* NCCL") in ({nccl}, None)  # texts are literal, not patterns


def test_a_set_added_later_is_asked_of_the_line_again() -> None:
    sets = LiteralSets()
    first = sets.add(["alpha"])
    line = "alpha beta"
    assert sets.hits(line) in ({first}, None)
    second = sets.add(["beta"])
    assert sets.hits(line) in ({first, second}, None)


def _lines() -> list[str]:
    from kbdebug._resources import data_dir

    out: list[str] = []
    for path in sorted(data_dir("knowledge").glob("*/examples/*/*.log")):
        out += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return out


@pytest.mark.parametrize("grammar", names())
def test_the_shared_pass_hides_no_start_of_a_format(grammar: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule example's every line: each format's anchors find the same starts with the shared pass in
    front of them as without it."""
    found = [(a, line, a.starts(line, 8)) for a in (anchors(grammar), own_line(grammar)) if a is not None for line in _lines()]
    monkeypatch.setattr(LiteralSets, "hits", lambda self, text: None)
    assert all(a.starts(line, 8) == starts for a, line, starts in found)
    assert any(starts for _, _, starts in found)  # the lines hold starts of the format's to hide
