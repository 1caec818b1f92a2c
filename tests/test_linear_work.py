"""The work a log costs grows linearly with what it holds, counted, not timed: the lines of kbdebug's own code
executed while diagnosing a retry loop's log (the same short traceback printed again and again) at two sizes.
A step that compares every incident with every record (as reading an exception's own records once did) makes
the count grow with the square of the size; linear work grows with the size."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from kbdebug import api
from kbdebug.diagnoser.match import diagnose_records
from kbdebug.kb import load_kb
from kbdebug.parse.regions import parse_text
from kbdebug.scan import REPEATS, WHOLE, Scanner, scan_bytes

PACKAGE = str(Path(api.__file__).parent)

ATTEMPT = (
    "WARNING client: attempt {i} failed, retrying in 1s\n"
    "Traceback (most recent call last):\n"
    '  File "/app/client.py", line 42, in fetch\n'
    "    resp = session.get(url, timeout=5)\n"
    "ConnectionError: HTTPSConnectionPool(host='hub.example.com', port=443): Read timed out. (read timeout=5)\n"
)


def retry_log(attempts: int) -> str:
    return "".join(ATTEMPT.format(i=i) for i in range(attempts))


def lines_executed(work: Callable[[], object]) -> int:
    """How many lines of kbdebug's code `work()` executes (frames outside the package are not traced)."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def test_reading_a_retry_loop_grows_linearly_with_its_incidents() -> None:
    small, large = retry_log(40), retry_log(160)
    assert len(large) < WHOLE  # both read whole: every attempt is parsed
    parse_text(small)  # grammars and parsers loaded before counting
    few = lines_executed(lambda: parse_text(small))
    many = lines_executed(lambda: parse_text(large))
    # 4x the incidents: linear work is ~4x (plus what is paid once); quadratic work would be ~16x
    assert 3.0 < many / few < 5.0, (few, many)


def test_diagnosing_a_retry_loop_grows_linearly_with_its_incidents() -> None:
    """Matching records to rules and grouping them: 16x the incidents is 16x the work. Comparing each exception
    with every record (how an exception once found the records read off its own lines) made it 20x at this
    size, and worse the larger the log; the count is exact, so the bound can be close."""
    kb = load_kb(None)
    small, large = parse_text(retry_log(40)), parse_text(retry_log(640))
    diagnose_records(small, kb)
    few = lines_executed(lambda: diagnose_records(small, kb))
    many = lines_executed(lambda: diagnose_records(large, kb))
    assert 14.0 < many / few < 17.5, (few, many)


def test_a_repeated_hit_line_opens_no_more_regions_past_its_repeats() -> None:
    """Past WHOLE the scanner stops opening regions for a line it met REPEATS times (its numbers aside): a retry
    loop of any length costs the regions of its first attempts and of its end."""
    filler = b"".join(b"step %d loss 0.%04d\n" % (i, i) for i in range(20000))
    attempt = ATTEMPT.encode()
    text = b"".join(attempt.replace(b"{i}", b"%d" % i) + filler[: 64 * 1024] for i in range(40))
    text += b"RuntimeError: CUDA error: device-side assert triggered\n"
    assert len(text) > WHOLE
    scanner = Scanner(lambda: scan_needles())
    scanner.feed(text)
    regions = scanner.close()
    # each attempt's traceback is far from the others (64 KiB of steps between): only the first REPEATS open a
    # region of their own; the crash at the end opens one more
    assert scanner.repeats > 0
    assert len(regions) == REPEATS + 1, [r.first_line for r in regions]
    assert "RuntimeError: CUDA error: device-side assert triggered" in regions[-1].lines[-1].text
    assert len(scan_bytes(text, scan_needles)) == len(regions)


def scan_needles() -> tuple[bytes, ...]:
    from kbdebug.parse.needles import needles

    return needles()


def test_an_assert_flood_is_parsed_once_per_distinct_assert_and_read_as_if_each_line_were(monkeypatch: Any) -> None:
    """A device assert prints one line per failing thread, alike but for the block and thread: the grammar reads the
    first of each distinct assert, the others reuse its reading with their own coordinates, and the records are
    those that parsing every line gives."""
    from kbdebug.parse.readers import kernel_assert

    line = (
        "/pytorch/aten/src/ATen/native/cuda/{f}.cu:{n}: operator(): block: [{b},0,0], thread: [{t},0,0] "
        'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n'
    )
    flood = "".join(
        line.format(f=f, n=n, b=b, t=t) for f, n in (("IndexKernel", 92), ("ScatterGatherKernel", 144)) for b in range(3) for t in range(30)
    )
    parses: list[str] = []
    real = kernel_assert.parse

    def counted(grammar: str, text: str) -> Any:
        parses.append(text)
        return real(grammar, text)

    monkeypatch.setattr(kernel_assert, "parse", counted)
    reused = parse_text(flood)
    assert len(parses) == 2  # one per distinct assert
    monkeypatch.setattr(kernel_assert, "MAX_SHAPES", 0)
    each = parse_text(flood)
    assert len(parses) == 2 + 180  # (under MAX_ASSERT_PARSES: past it, lines are counted by regex alike)
    assert reused == each
    (first, second) = [r for r in reused if r.kind == "kernel_assert"]
    assert (first.count, first.distinct_blocks, first.distinct_threads, second.kernel_file) == (90, 3, 90, "ScatterGatherKernel.cu")
