"""Throughput of `kbdebug explain` on a large noisy log, as a ratio to `grep -c -F` for kbdebug's own needles
(kbdebug.parse.needles) on the same file.

Builds logs of training noise (tqdm redraws, INFO lines, rank-prefixed iteration lines) with one
real error block near the end, then times both tools in the same run and prints peak RSS.
`real` is the realistic noisy log (warnings every few steps, NCCL and DataLoader warnings, metric lines
named `*_error`): its target is <= 4x grep, < 150 MB, and the diagnosis of its last 64 KiB alone.
Two hostile shapes are measured too: a log of `\r` progress redraws that never writes a newline (tqdm in
a container log) and one endless line without any line end. Peak RSS counts kbdebug and any child of it;
the target is < 150 MB at 1 GB whatever the shape.
Usage: python benchmarks/scan.py [--sizes 250,1000] [--kinds noisy,real,cr,nonl] (MB)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ERROR = (
    "/pytorch/aten/src/ATen/native/cuda/NLLLoss2d.cu:103: nll_loss2d_forward_kernel: block: [17,0,0], "
    "thread: [96,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    'Traceback (most recent call last):\n  File "train.py", line 151, in main\n    running_loss += loss.item()\n'
    "RuntimeError: CUDA error: device-side assert triggered\n"
)


def build(path: Path, mb: int) -> None:
    rnd = random.Random(0)
    lines = []
    for i in range(20000):
        r = rnd.random()
        if r < 0.7:
            bar = f"{'#' * (i % 30):<30}"
            lines.append(f"Epoch {i % 50}: {i % 100}%|{bar}| {i}/500150 [6:28:43<94:39:17, 1.37it/s, loss={rnd.random():.4f}]\r")
        elif r < 0.9:
            lines.append(
                f"2024-01-01 12:00:{i % 60:02d},593 INFO trainer.py:{i % 400} step {i} "
                f"loss {rnd.random():.5f} grad_norm {rnd.random() * 10:.3f}\n"
            )
        else:
            lines.append(
                f"[rank{i % 8}]: iteration {i} | consumed samples {i * 32} | elapsed time per iteration (ms): {rnd.random() * 900:.1f} |\n"
            )
    block = "".join(lines).encode()
    target = mb * 1_000_000
    with open(path, "wb") as fh:
        written = 0
        while written < target - len(block):
            fh.write(block)
            written += len(block)
        fh.write(ERROR.encode())
        fh.write(block[:50_000])


def build_real(path: Path, mb: int) -> None:
    """What real training output holds besides progress: logger lines, a `UserWarning` (with the source line
    `warnings.warn` prints under it) every few steps, NCCL `Warning:` lines, DataLoader warnings, metric lines
    whose names hold `error` (`mean_abs_error=`), and a CUDA device assert with its traceback at the end."""
    rnd = random.Random(2)
    lines = []
    for i in range(20000):
        step = i * 7
        lines.append(
            f"Epoch {i % 50}: {i % 100}%|{'#' * (i % 30):<30}| {step}/500150 [6:28:43<94:39:17, 1.37it/s, loss={rnd.random():.4f}]\r"
        )
        lines.append(f"2024-01-01 12:{i % 60:02d}:{i % 59:02d},593 INFO trainer.py:{i % 400} step {step} loss {rnd.random():.5f}\n")
        if i % 4 == 0:
            lines.append(
                "/usr/lib/python3.10/site-packages/torch/optim/lr_scheduler.py:139: UserWarning: Detected call of "
                "`lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in "
                "the opposite order: `optimizer.step()` before `lr_scheduler.step()`.\n"
                '  warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "\n'
            )
        if i % 5 == 0:
            lines.append(
                f"val step {step}: mean_abs_error={rnd.random():.3f} mean_squared_error={rnd.random():.4f} error_rate={rnd.random():.3f}\n"
            )
        if i % 97 == 0:
            lines.append(
                f"[rank{i % 8}]:[W ProcessGroupNCCL.cpp:1856] Warning: 0NCCL_AVOID_RECORD_STREAMS=1 has no effect for "
                "point-to-point collectives. (function operator())\n"
            )
        if i % 211 == 0:
            lines.append(
                "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will "
                "create 16 worker processes in total. Our suggested max number of worker in current system is 8, which "
                "is smaller than what this DataLoader is going to create.\n  warnings.warn(_create_warning_msg(\n"
            )
    block = "".join(lines).encode()
    with open(path, "wb") as fh:
        written = 0
        while written < mb * 1_000_000 - len(block):
            fh.write(block)
            written += len(block)
        rest = block[: max(0, mb * 1_000_000 - written - 4096)]
        fh.write(rest[: rest.rfind(b"\n") + 1])
        fh.write(ERROR.encode())


def build_cr(path: Path, mb: int) -> None:
    """Only `\r` redraws, no newline until the error."""
    chunk = b"".join(
        b"Epoch 1: %3d%%|%-30s| %d/500 [00:%02d<01:00, 1.37it/s, loss=0.%04d]\r" % (i % 100, b"#" * (i % 30), i, i % 60, i)
        for i in range(20000)
    )
    _fill(path, mb, chunk)


def build_nonl(path: Path, mb: int) -> None:
    """One line of a megabyte-repeating pattern with no line end at all, the error glued to its end."""
    _fill(path, mb, bytes(random.Random(1).choice(b"abcdef0123 .,:") for _ in range(1 << 20)))


def _fill(path: Path, mb: int, chunk: bytes) -> None:
    with open(path, "wb") as fh:
        written = 0
        while written < mb * 1_000_000:
            fh.write(chunk)
            written += len(chunk)
        fh.write(b" " + ERROR.encode())


def timed(cmd: list[str]) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system, children included) of two runs. The output goes to a
    pipe: GNU grep stops at its first match when its output is /dev/null, which is no baseline."""
    best, best_cpu = 1e9, 1e9
    for _ in range(2):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best, best_cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="250,1000")
    ap.add_argument("--kinds", default="noisy,real,cr,nonl")
    args = ap.parse_args()
    builders = {"noisy": build, "real": build_real, "cr": build_cr, "nonl": build_nonl}
    from kbdebug.parse.needles import needles  # the baseline greps for what kbdebug searches for

    grep_pattern = [arg for n in needles() for arg in ("-e", n.decode())]
    with tempfile.TemporaryDirectory() as tmp:
        for kind, mb in ((k, int(s)) for k in args.kinds.split(",") for s in args.sizes.split(",")):
            path = Path(tmp) / f"{kind}_{mb}.log"
            builders[kind](path, mb)
            subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL)  # warm the page cache
            grep_s, grep_cpu = timed(["grep", "-c", "-F", *grep_pattern, str(path)])
            kb_s, kb_cpu = timed([sys.executable, "-m", "kbdebug", "explain", "-q", "--format", "json", str(path)])
            rss = _peak_rss(path)
            size = os.path.getsize(path) / 1e6
            print(
                f"{kind:5s} {size:7.0f} MB  grep -c {grep_s:6.2f} s ({grep_cpu:6.2f} s CPU)  kbdebug {kb_s:6.2f} s "
                f"({kb_cpu:6.2f} s CPU)  ratio {kb_s / grep_s:5.2f}x (CPU {kb_cpu / grep_cpu:5.2f}x)  "
                f"{kb_s * 1000 / size:5.2f} ms/MB  peak RSS {rss / 1024:6.1f} MB (target < 150 MB)  "
                f"same diagnosis as its last 64 KiB alone: {_same_as_tail(path)}"
            )
            path.unlink()
    return 0


def _same_as_tail(path: Path) -> bool:
    """Whether the log diagnoses as its last 64 KiB alone does (the crash is at the end; what comes before is
    noise), the incidents compared without their line numbers."""
    tail = path.with_suffix(".tail.log")
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - 65536))
        data = fh.read()
    # from its first line start: past a \n, or a \r in a log of redraws (its first \n may end the crash's own line)
    tail.write_bytes(data[min((i for i in (data.find(b"\n"), data.find(b"\r")) if i != -1), default=-1) + 1 :])
    try:
        whole, end = (_incidents(p) for p in (path, tail))
    finally:
        tail.unlink()
    return whole == end


def _incidents(path: Path) -> object:
    out = subprocess.run([sys.executable, "-m", "kbdebug", "explain", "-q", "--format", "json", str(path)], capture_output=True, text=True)

    def placeless(x: object) -> object:
        if isinstance(x, dict):
            return {k: placeless(v) for k, v in x.items() if k not in ("first_line", "last_line", "source")}
        if isinstance(x, str):  # a line of \r redraws as a terminal shows it: how many redraws were kept varies
            return x.rsplit("\r", 1)[-1]
        return [placeless(v) for v in x] if isinstance(x, list) else x

    return placeless(json.loads(out.stdout)["incidents"]) if out.stdout.strip() else None


def _peak_rss(path: Path) -> int:
    code = (
        f"import resource,runpy,sys; sys.argv=['kbdebug','explain','-q','--format','json',{str(path)!r}]\n"
        "try:\n  runpy.run_module('kbdebug', run_name='__main__')\nexcept SystemExit: pass\n"
        "print(max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
        " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss), file=sys.stderr)"
    )  # children included
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(proc.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
