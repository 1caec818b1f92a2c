"""Throughput of `kbdebug explain` on a large noisy log, as a ratio to `grep -c` on the same file.

Builds logs of training noise (tqdm redraws, INFO lines, rank-prefixed iteration lines) with one
real error block near the end, then times both tools in the same run and prints peak RSS.
Usage: python benchmarks/scan.py [--sizes 250,1000] (MB)
"""

from __future__ import annotations

import argparse
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
    "Traceback (most recent call last):\n  File \"train.py\", line 151, in main\n    running_loss += loss.item()\n"
    "RuntimeError: CUDA error: device-side assert triggered\n"
)
GREP_PATTERN = ["-e", "rror", "-e", "ssert", "-e", "=====", "-e", "Warn", "-e", "NCCL"]


def build(path: Path, mb: int) -> None:
    rnd = random.Random(0)
    lines = []
    for i in range(20000):
        r = rnd.random()
        if r < 0.7:
            bar = f"{'#' * (i % 30):<30}"
            lines.append(f"Epoch {i % 50}: {i % 100}%|{bar}| {i}/500150 [6:28:43<94:39:17, 1.37it/s, loss={rnd.random():.4f}]\r")
        elif r < 0.9:
            lines.append(f"2024-01-01 12:00:{i % 60:02d},593 INFO trainer.py:{i % 400} step {i} "
                         f"loss {rnd.random():.5f} grad_norm {rnd.random() * 10:.3f}\n")
        else:
            lines.append(f"[rank{i % 8}]: iteration {i} | consumed samples {i * 32} | "
                         f"elapsed time per iteration (ms): {rnd.random() * 900:.1f} |\n")
    block = "".join(lines).encode()
    target = mb * 1_000_000
    with open(path, "wb") as fh:
        written = 0
        while written < target - len(block):
            fh.write(block)
            written += len(block)
        fh.write(ERROR.encode())
        fh.write(block[: 50_000])


def timed(cmd: list[str]) -> tuple[float, int]:
    best = 1e9
    rss = 0
    for _ in range(2):
        start = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - start)
        rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    return best, rss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="250,1000")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for mb in (int(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"train_{mb}.log"
            build(path, mb)
            subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL)  # warm the page cache
            grep_s, _ = timed(["grep", "-c", *GREP_PATTERN, str(path)])
            kb_s, _ = timed([sys.executable, "-m", "kbdebug", "explain", "-q", "--format", "json", str(path)])
            rss = _peak_rss(path)
            size = os.path.getsize(path) / 1e6
            print(f"{size:7.0f} MB  grep -c {grep_s:6.2f} s  kbdebug {kb_s:6.2f} s  "
                  f"ratio {kb_s / grep_s:5.2f}x  kbdebug {size / kb_s:6.0f} MB/s  peak RSS {rss / 1024:6.1f} MB")
            path.unlink()
    return 0


def _peak_rss(path: Path) -> int:
    code = (f"import resource,runpy,sys; sys.argv=['kbdebug','explain','-q','--format','json',{str(path)!r}]\n"
            "try:\n  runpy.run_module('kbdebug', run_name='__main__')\nexcept SystemExit: pass\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(proc.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
