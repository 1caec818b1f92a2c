"""`records[].raw` is the log's own text: the whole original lines a record was read from, byte for byte (as
decoded text), however the log was damaged on its way (rank prefixes, CRLF, hard wrapping, full-width
punctuation, ANSI colours). The grammars read the normalised lines; the quote is taken from the bytes kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kbdebug.normalise import MAX_FLAT
from kbdebug.parse.regions import parse_text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(ROOT.glob("knowledge/*/examples/*/*.log"))
CORPUS = Path("/work/shared/corpus/dev")
CORPUS_LOGS = sorted(CORPUS.glob("*.log")) if CORPUS.is_dir() else []


def _ranked(text: str) -> str:
    return "".join(f"[rank3]: {line}" for line in text.splitlines(keepends=True))


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _wrapped(text: str, width: int = 80) -> str:
    out = []
    for line in text.split("\n"):
        out.extend([line[k : k + width] for k in range(0, len(line), width)] or [""])
    return "\n".join(out)


def _fullwidth(text: str) -> str:
    return text.translate({ord(c): 0xFF01 + ord(c) - 0x21 for c in ":()[],"})


def _curly(text: str) -> str:
    return text.replace('"', "\u201c").replace(" ", "\u00a0", 3)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _coloured(text: str) -> str:
    return "\n".join(f"\x1b[31m{line}\x1b[0m" if "Error" in line else line for line in text.split("\n"))


DAMAGE: dict[str, Callable[[str], str]] = {
    "as printed": lambda text: text,
    "rank prefixes": _ranked,
    "CRLF": _crlf,
    "wrapped at 80": _wrapped,
    "full-width punctuation": _fullwidth,
    "ANSI colours": _coloured,
    "curly quotes and no-break spaces": _curly,
    "HTML entities": _html,
}


def assert_raw_is_the_log(text: str) -> int:
    """Every record's raw is a run of whole lines of `text` that starts at the record's first line."""
    lines = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").split("\n")
    records = parse_text(text)
    for rec in records:
        quoted = rec.raw.split("\n")
        at = rec.first_line - 1
        assert lines[at : at + len(quoted)] == quoted, f"{rec.kind} at line {rec.first_line}: {rec.raw!r}"
    return len(records)


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_raw_of_every_rule_example_is_the_log(damage: str) -> None:
    quoted = sum(assert_raw_is_the_log(DAMAGE[damage](p.read_text(encoding="utf-8"))) for p in EXAMPLES)
    assert quoted > len(EXAMPLES)  # records were read, and each was checked


@pytest.mark.skipif(not CORPUS_LOGS, reason="the dev corpus is not on this machine")
@pytest.mark.parametrize("damage", ["as printed", "rank prefixes", "wrapped at 80"])
def test_raw_of_every_corpus_log_is_the_log(damage: str) -> None:
    quoted = sum(assert_raw_is_the_log(DAMAGE[damage](p.read_text(encoding="utf-8", errors="replace"))) for p in CORPUS_LOGS)
    assert quoted > len(CORPUS_LOGS) // 2


def test_a_rank_prefix_and_a_wrap_stay_in_raw_while_the_message_is_read_without_them() -> None:
    head = "[rank3]: RuntimeError: CUDA error: device-side assert triggered. Compile with `TORCH_USE_DSA` to "
    text = f"{head[:80]}\n{head[80:]}\r\n[rank3]: CUDA kernel errors might be asynchronously reported\r\n"
    records = [r for r in parse_text(text) if r.kind == "cuda_error"]
    assert records, parse_text(text)
    assert records[0].raw.split("\n")[0] == head[:80]
    assert "[rank3]" not in str(records[0].model_dump(exclude={"raw"}))


def test_slurm_stars_stay_as_printed() -> None:
    text = "slurmstepd: error: *** JOB 1234 ON node7 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***\n"
    assert [r.raw for r in parse_text(text)] == [text.rstrip("\n")]


def test_a_line_of_megabytes_is_quoted_cut_as_the_grammars_read_it() -> None:
    bar = "".join(f"Epoch 1: {i % 100:3d}%|####      | {i}/500 [loss=0.{i}]\r" for i in range(20000))
    text = f"{bar}RuntimeError: CUDA error: device-side assert triggered\n"
    records = [r for r in parse_text(text) if r.kind == "cuda_error"]
    assert records
    raw = records[0].raw
    assert len(raw) <= MAX_FLAT + 100 and "characters cut]" in raw
    assert raw.endswith("RuntimeError: CUDA error: device-side assert triggered")
