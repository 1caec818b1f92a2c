from __future__ import annotations

import io

import pytest

from kbdebug.normalise import iter_lines
from kbdebug.parse.needles import needles
from kbdebug.scan import WHOLE, Scanner
from kbdebug.scan import scan_bytes as _scan_bytes
from kbdebug.scan import scan_stream as _scan_stream
from kbdebug.scan import scan_text as _scan_text

NEEDLES = needles  # the provider: the scanner asks for them when an input outgrows WHOLE


def scan_bytes(data: bytes) -> list:
    return _scan_bytes(data, NEEDLES)


def scan_stream(stream) -> list:
    return _scan_stream(stream, NEEDLES)


def scan_text(text: str) -> list:
    return _scan_text(text, NEEDLES)


def texts(data: bytes) -> list[str]:
    return [ln.text for ln in iter_lines(scan_bytes(data))]


def test_noise_only_gives_no_region() -> None:
    noise = b"".join(b"Epoch 1: %d%%|###| loss=0.1\r" % i for i in range(1000)) + b"\n"
    noise *= 1 + WHOLE // len(noise)  # a small input is read whole; a large one only around its needles
    assert scan_bytes(noise) == []


def test_small_input_is_one_region_even_without_needles() -> None:
    text = "step 10 loss 0.3\nCUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB\n"
    regions = scan_text(text)
    assert [ln.text for r in regions for ln in r.lines] == text.splitlines()


def test_ansi_crlf_and_carriage_returns_are_normalised() -> None:
    data = b"step 1\r\n\x1b[31mRuntimeError: CUDA error: boom\x1b[0m\r\nprogress 10%\rprogress 20%\r\n"
    lines = texts(data)
    assert "RuntimeError: CUDA error: boom" in lines
    assert "progress 20%" in lines and "progress 10%" in lines


def test_prefixes_are_stripped_and_rank_kept() -> None:
    data = (
        b"[rank3]: RuntimeError: CUDA error: invalid device ordinal\n"
        b"[default1]:Traceback (most recent call last):\n"
        b"2024-01-02 03:04:05,123 ERROR | run.py | line 4 : ValueError: bad\n"
        b"0: IndexError: Target 3 is out of bounds.\n"
    )
    lines = list(iter_lines(scan_bytes(data)))
    assert (lines[0].text, lines[0].rank) == ("RuntimeError: CUDA error: invalid device ordinal", 3)
    assert (lines[1].text, lines[1].rank) == ("Traceback (most recent call last):", 1)
    assert lines[2].text == "ValueError: bad"
    assert (lines[3].text, lines[3].rank) == ("IndexError: Target 3 is out of bounds.", 0)


def test_glued_records_are_split() -> None:
    data = (
        b"RuntimeError: CUDA error: device-side assert triggeredTraceback (most recent call last):\n"
        b"test_x (T) ... ========= Invalid __global__ read of size 2 bytes\n"
    )
    lines = texts(data)
    assert "RuntimeError: CUDA error: device-side assert triggered" in lines
    assert "Traceback (most recent call last):" in lines
    assert "========= Invalid __global__ read of size 2 bytes" in lines


def test_windows_80_column_wrap_is_rejoined() -> None:
    head = "=========     at 0x00000ae8 in d:\\projects\\some\\very\\long\\path\\to\\the\\source\\fil"
    assert len(head) == 80
    other = "=========     Saved host backtrace up to driver entry point at kernel launch tim"
    assert len(other) == 80
    data = f"========= Invalid __global__ read of size 4\n{head}\nle.cu:148:kern(float)\n{other}\ne\n".encode()
    lines = texts(data)
    assert head + "le.cu:148:kern(float)" in lines
    assert other + "e" in lines


def test_repeated_equal_length_lines_are_not_joined() -> None:
    line = "../x/Loss.cu:1: k: block: [0,0,0], thread: [1,0,0] Assertion `t >= 0 && t < n_classes` failed."
    lines = texts(("\n".join([line] * 5) + "\n").encode())
    assert lines == [line] * 5


def test_invalid_utf8_and_markdown_bold_survive() -> None:
    data = b"\xff\xfe **RuntimeError: CUDA error: x\xc3(** (*input, **kwargs)\n"
    (line,) = texts(data)
    assert "RuntimeError: CUDA error" in line and "**kwargs" in line and "**RuntimeError" not in line


def test_streaming_in_tiny_chunks_equals_whole() -> None:
    data = b"noise\n" * 3000 + b"IndexError: Target 3 is out of bounds.\n" + b"noise\n" * 3000 + b"x Assertion y\n"
    whole = [(ln.no, ln.text) for ln in iter_lines(scan_bytes(data))]
    s = Scanner(NEEDLES, back=2048, fwd=512)
    for i in range(0, len(data), 7):
        s.feed(data[i : i + 7])
    tiny = [(ln.no, ln.text) for ln in iter_lines(s.close())]
    ref = Scanner(NEEDLES, back=2048, fwd=512)
    ref.feed(data)
    assert tiny == [(ln.no, ln.text) for ln in iter_lines(ref.close())]
    assert (3001, "IndexError: Target 3 is out of bounds.") in whole


def test_line_numbers_are_source_lines() -> None:
    data = b"a\n" * 100000 + b"ValueError: x\n"
    (line,) = [ln for ln in iter_lines(scan_stream(io.BytesIO(data))) if "ValueError" in ln.text]
    assert line.no == 100001


def test_every_needle_is_in_every_evidence_kind() -> None:
    samples = [
        "Assertion `x` failed.",
        "RuntimeError: x",
        "cuDNN error: X",
        "========= Invalid",
        "UserWarning: x",
        "[E ProcessGroupNCCL.cpp:1] Watchdog caught",
        "THCudaCheck FAIL error=74",
    ]
    for sample in samples:
        assert any(n.decode() in sample for n in NEEDLES()), sample


def test_progress_redraws_without_newlines_stay_bounded() -> None:
    """A tqdm log is often one "line" of \\r redraws; the buffer must not grow with it."""
    from kbdebug.scan import LONG_LINE, Scanner

    redraw = b"Epoch 1:  45%|####      | 4500/10000 [01:23<01:40, 54.2it/s, loss=0.123]\r"
    chunk = redraw * (1 << 20 // len(redraw) + 1)
    scanner = Scanner(NEEDLES)
    peak = 0
    for i in range(24):
        if i == 20:
            scanner.feed(b"/x/Loss.cu:250: nll: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\r")
        scanner.feed(chunk)
        peak = max(peak, len(scanner._buf))
    scanner.feed(b"\nRuntimeError: CUDA error: device-side assert triggered\n")
    regions = scanner.close()
    assert peak < 3 * LONG_LINE
    text = "\n".join(line.text for r in regions for line in r.lines)
    assert "Assertion `t >= 0 && t < n_classes` failed." in text
    assert "device-side assert triggered" in text


@pytest.mark.parametrize("chunk", [4096, 1 << 20, 8 << 20])
def test_a_hit_after_megabytes_of_redraws_keeps_its_line_whatever_the_read_size(chunk: int) -> None:
    """The assertion is the last `\\r` segment of a line of megabytes of redraws: its region, opened BACK bytes
    before it, starts at a segment, never at the next `\\n`, which comes after the assertion."""
    from kbdebug.scan import LONG_LINE

    redraw = b"Epoch 1:  45%|####      | 4500/10000 [01:23<01:40, 54.2it/s, loss=0.123]\r"
    data = redraw * (3 * LONG_LINE // len(redraw)) + (
        b"/x/Loss.cu:250: nll: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
        b"RuntimeError: CUDA error: device-side assert triggered\n"
    )
    lines = [line.text for line in iter_lines(_scan_stream(io.BytesIO(data), NEEDLES, chunk))]
    assert lines[-2:] == [
        "/x/Loss.cu:250: nll: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        "RuntimeError: CUDA error: device-side assert triggered",
    ]


def _noise(n: int, seed: int) -> bytes:
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        r = rnd.random()
        if r < 0.5:
            out.append(f"Epoch 1: {i % 100}%|{'#' * (i % 20):<20}| {i}/9999 [00:01<00:02, 9.1it/s]\r".encode())
        elif r < 0.97:
            out.append(f"2024-01-01 12:00:00,593 INFO step {i} loss {rnd.random():.4f}\n".encode())
        elif r < 0.98:
            out.append(b"/x/Loss.cu:250: nll: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n")
        elif r < 0.99:
            out.append(b"RuntimeError: CUDA error: device-side assert triggered\r\n")
        else:
            out.append(b"UserWarning: something \xff\xfe odd\n" + b"x" * rnd.randint(0, 3_000_000) + b"\n")
    return b"".join(out)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_file_gives_the_same_evidence_whatever_the_read_size(tmp_path, seed: int) -> None:
    """Hits right after one another, lines of megabytes and needles across two reads: each evidence line is found,
    with its number and text, whether the file is read a megabyte at a time or in much smaller or larger pieces."""
    from kbdebug import scan

    path = tmp_path / "log.txt"
    path.write_bytes(_noise(4000, seed) + b"filler line\n" * 200_000 + _noise(300, seed + 10))
    found = evidence(scan.scan_path(path, NEEDLES))
    assert len(found) > 50
    for chunk in (4093, 64 << 10, 8 << 20):
        with open(path, "rb") as fh:
            assert evidence(scan.scan_stream(fh, NEEDLES, chunk)) == found, chunk


def test_without_re2_the_needles_are_found_alike(monkeypatch) -> None:
    """Where google-re2 is missing the needles are searched by Python's engine: the same regions."""
    import sys

    data = b"".join(line for line in _noise(20000, 4).splitlines(keepends=True) if len(line) < 1000)
    assert len(data) > WHOLE
    expected = scan_bytes(data)
    assert expected
    monkeypatch.setitem(sys.modules, "re2", None)
    assert scan_bytes(data) == expected


def evidence(regions: list) -> set[tuple[int, str]]:
    return {(ln.no, ln.text) for ln in iter_lines(regions) if any(n.decode() in ln.text for n in NEEDLES())}


def test_redraw_segments_are_not_rejoined_as_wrapped_lines() -> None:
    bars = b"".join(f"Epoch 1: {p:3d}%|{'#' * (p // 5):<20}| {p}/100 [00:01<00:02, 9.1it/s, loss=0.5]\r".encode() for p in range(0, 60, 2))
    data = bars + b"RuntimeError: CUDA error: device-side assert triggered\n"
    lines = texts(data)
    assert "RuntimeError: CUDA error: device-side assert triggered" in lines
    assert all(len(t) < 100 for t in lines)
