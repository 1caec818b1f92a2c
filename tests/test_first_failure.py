"""Which rank failed first, and when: time stamps of every common style are kept through the pipeline, and the
root incident (one interleaved log) or the summary (one file per rank) names the earliest failing rank."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from conftest import run_cli

from kbdebug.api import diagnose_text
from kbdebug.core.stamps import earliest, parse_stamp
from kbdebug.normalise import lines_of
from kbdebug.render import json_object

ASSERT = [
    "/opt/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [7,0,0], thread: [33,0,0] "
    'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.',
    "Traceback (most recent call last):",
    '  File "/job/train.py", line 51, in step',
    "    emb = table[ids]",
    "RuntimeError: CUDA error: device-side assert triggered",
]


def timeout(rank: int) -> str:
    return (
        f"[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, "
        f"OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 6000{rank}2 milliseconds before timing out."
    )


# (style, how a line at hh:mm:ss on rank r is prefixed, the time as the report prints it for 12:03:11)
STYLES: dict[str, tuple[Callable[[int, str, str], str], str]] = {
    "iso": (lambda r, t, line: f"[rank{r}]:2024-05-01T{t}.250Z {line}", "2024-05-01T12:03:11.250Z"),
    "logging": (lambda r, t, line: f"[{'2024-05-01'} {t},123] [rank{r}]: {line}", "2024-05-01 12:03:11,123"),
    "glog": (lambda r, t, line: f"[default{r}]:I0501 {t}.123456  4242 train.cc:88] {line}", "0501 12:03:11.123456"),
    "journald": (lambda r, t, line: f"May 01 {t} node7 torchrun[311]: [rank{r}]: {line}", "May 01 12:03:11"),
}


def job(stamp: Callable[[int, str, str], str], causal: int, ranks: int = 8) -> str:
    """One interleaved log: rank 0's timeout printed first (its line is first), the causal rank's assert stamped earliest."""
    lines = [stamp(r, f"12:13:1{r}", timeout(r)) for r in range(ranks) if r != causal]
    mine = [stamp(causal, "12:03:11", line) for line in ASSERT]
    return "\n".join(lines[:2] + mine + lines[2:]) + "\n"


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("causal", [5, 2])
def test_interleaved_log_names_the_rank_that_failed_first(style: str, causal: int) -> None:
    stamp, shown = STYLES[style]
    diag = diagnose_text(job(stamp, causal))
    assert [i.rule for i in diag.incidents] == ["index_out_of_bounds"]
    first = diag.incidents[0].first_failure
    assert first is not None
    assert (first.rank, first.time) == (causal, shown)
    assert f"First failure: rank {causal} at {shown}\n" in diag.render("text")
    assert f"First failure: `rank {causal} at {shown}`" in diag.render("markdown")
    assert json_object(diag)["incidents"][0]["first_failure"]["rank"] == causal


def test_a_rank_stamped_before_the_causal_one_is_named() -> None:
    """The report says who failed first by the clock, even when that is not the rank whose error is the cause."""
    lines = [f"[rank{r}]:[2024-05-01 12:13:0{r},000] {timeout(r)}" for r in (0, 1, 4)]
    lines.insert(1, f"[rank6]:[2024-05-01 12:00:59,000] {timeout(6)}")
    lines += [f"[rank3]:[2024-05-01 12:03:11,000] {line}" for line in ASSERT]
    first = diagnose_text("\n".join(lines) + "\n").incidents[0].first_failure
    assert first is not None and (first.rank, first.time) == (6, "2024-05-01 12:00:59,000")


def test_the_causal_ranks_time_must_be_known() -> None:
    """c10 stamps only its own NCCL lines: without the causal rank's time, no rank is named as the first."""
    lines = [f"[rank{r}]:[E501 12:13:1{r}.123456 ProcessGroupNCCL.cpp:616] {timeout(r)[30:]}" for r in (0, 1, 2)]
    lines += [f"[rank3]:{line}" for line in ASSERT]
    diag = diagnose_text("\n".join(lines) + "\n")
    assert diag.incidents[0].rule == "index_out_of_bounds"
    assert diag.incidents[0].first_failure is None
    assert "First failure" not in diag.render("text")


def test_no_time_stamps_no_first_failure() -> None:
    diag = diagnose_text(job(lambda r, t, line: f"[rank{r}]:{line}", causal=4))
    assert diag.incidents[0].first_failure is None
    assert json_object(diag)["incidents"][0]["first_failure"] is None


def test_lines_keep_their_time_and_rank() -> None:
    text = "2024-05-01 12:03:11,123 - ERROR - [rank3]: RuntimeError: boom\n[E1004 15:02:41.906416000 ProcessGroupNCCL.cpp:616] x\nplain\n"
    lines = lines_of(text)
    assert [(ln.rank, ln.time.at if ln.time else None) for ln in lines] == [
        (3, "2024-05-01T12:03:11.123000"),
        (None, "--10-04T15:02:41.906416"),
        (None, None),
    ]
    assert lines[0].text == "RuntimeError: boom"


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("2024-05-01 12:03:11,123", "2024-05-01T12:03:11.123000"),
        ("[2024-05-01 12:03:11,123]", "2024-05-01T12:03:11.123000"),
        ("2024-05-01T14:03:11+02:00", "2024-05-01T12:03:11.000000"),
        ("2025-03-01_10:00:00", "2025-03-01T10:00:00.000000"),
        ("I0501 12:03:11.123456", "--05-01T12:03:11.123456"),
        ("E424 01:17:25.031978332", "--04-24T01:17:25.031978"),
        ("Oct  4 15:02:41", "--10-04T15:02:41.000000"),
        ("03-19 07:27:53", "--03-19T07:27:53.000000"),
    ],
)
def test_stamp_styles(text: str, at: str) -> None:
    stamp = parse_stamp(text)
    assert stamp is not None and stamp.at == at


def test_not_a_date_is_no_stamp_and_yearless_stamps_compare_without_the_year() -> None:
    assert parse_stamp("2024-13-01 12:00:00") is None and parse_stamp("step 12:00") is None
    a, b = parse_stamp("2023-12-31 09:00:00"), parse_stamp("I0501 08:00:00.000000")
    assert a is not None and b is not None
    assert earliest([a, b]) == b  # May before December once the year is not known for both
    c = parse_stamp("2022-06-01 00:00:00")
    assert c is not None and earliest([a, c]) == c


def test_one_file_per_rank_summary_names_the_first(tmp_path) -> None:
    files = []
    for r in range(8):
        if r == 5:
            body = "".join(f"[2024-05-01 12:03:11,500] [rank5]: {line}\n" for line in ASSERT)
        else:
            body = f"[2024-05-01 12:13:1{r},000] {timeout(r)}\n"
        path = tmp_path / f"worker-{r}.txt"
        path.write_text(body)
        files.append(str(path))
    proc = run_cli("explain", "--format", "json", *files)
    objs = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    first = objs[-1]["summary"]["first_failure"]
    assert (first["rank"], first["time"], first["source"]) == (5, "2024-05-01 12:03:11,500", files[5])
    text = " ".join(run_cli("explain", *files).stdout.decode().split())  # the summary wraps at 100 columns
    assert f"First failure: rank 5 at 2024-05-01 12:03:11,500 ({files[5]})" in text


def test_one_file_per_rank_without_rank_prefixes_names_the_file(tmp_path) -> None:
    (tmp_path / "a.log").write_text(f"2024-05-01 12:13:10 {timeout(1)}\n")
    (tmp_path / "b.log").write_text("".join(f"2024-05-01 12:02:00 {line}\n" for line in ASSERT))
    text = run_cli("explain", "--format", "markdown", str(tmp_path)).stdout.decode()
    assert f"First failure: {tmp_path / 'b.log'} at 2024-05-01 12:02:00" in text


def test_one_file_per_rank_folds_the_waiting_ranks_under_the_crash(tmp_path) -> None:
    """#30: rank 0's NCCL timeout in rank0.log is a consequence of rank 1's crash in rank1.log when both are
    explained together: one distinct crash, rank0.log named as waiting on it."""
    (tmp_path / "rank0.log").write_text(f"[2024-05-01 12:13:10,000] {timeout(0)}\n")
    (tmp_path / "rank1.log").write_text("".join(f"[2024-05-01 12:03:11,500] [rank1]: {line}\n" for line in ASSERT))
    proc = run_cli("explain", "--format", "json", str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log"))
    summary = json.loads(proc.stdout.decode().splitlines()[-1])["summary"]
    assert proc.returncode == 0 and summary["crashes"] == 1
    (top,) = summary["groups"]
    assert (
        top["rule"] != "nccl_error" and top["members"] == [str(tmp_path / "rank1.log")] and top["waiting"] == [str(tmp_path / "rank0.log")]
    )
    text = " ".join(run_cli("explain", str(tmp_path)).stdout.decode().split("summary: ")[1].split())
    assert (
        text.startswith("2 logs, 1 distinct crash") and f"other ranks waiting on it (collective timeouts): {tmp_path / 'rank0.log'}" in text
    )


def test_timeouts_beside_two_different_crashes_are_not_folded(tmp_path) -> None:
    """Two different crashes among the inputs: which one the timed-out rank waited on is not known."""
    (tmp_path / "a.log").write_text(f"{timeout(0)}\n")
    (tmp_path / "b.log").write_text("\n".join(ASSERT) + "\n")
    (tmp_path / "c.log").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    summary = json.loads(run_cli("explain", "-f", "json", str(tmp_path)).stdout.decode().splitlines()[-1])["summary"]
    assert summary["crashes"] == 3 and all(g["waiting"] == [] for g in summary["groups"])
