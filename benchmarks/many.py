"""`kbdebug explain DIR` on many logs, as a ratio to `kbdebug explain` on their concatenation, in the same run.

A thousand generated crash logs of a few kinds (device asserts, OOMs, shape errors, NCCL timeouts), each
with its own numbers, paths and ranks, are written to a directory and also concatenated into one file.
Target (issue: many logs): the directory within 2x the concatenation, with the crashes grouped right.
Usage: python benchmarks/many.py [--logs 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = [
    (
        "/opt/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:{a}: operator(): block: [{b},0,0], thread: [{c},0,0] "
        'Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
        'Traceback (most recent call last):\n  File "/runs/{r}/train.py", line {a}, in step\n    loss = crit(out.gather(1, idx), y)\n'
        "RuntimeError: CUDA error: device-side assert triggered\n"
    ),
    (
        'Traceback (most recent call last):\n  File "/runs/{r}/train.py", line {a}, in step\n    out = model(x)\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {b}.00 GiB. GPU {c} has a total capacity of 79.15 GiB\n"
    ),
    (
        'Traceback (most recent call last):\n  File "/runs/{r}/seg.py", line {a}, in step\n    loss = criterion(pred, label)\n'
        "ValueError: Target size (torch.Size([{b}, 1, 96, 96])) must be the same as input size (torch.Size([{b}, 14, 96, 96]))\n"
    ),
    (
        "[rank{c}]:[E ProcessGroupNCCL.cpp:616] [Rank {c}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={a}, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 60{b:04d} milliseconds before timing out.\n"
    ),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=1000)
    args = ap.parse_args()
    rnd = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        whole = []
        for i in range(args.logs):
            noise = "".join(f"step {j} loss 0.{rnd.randrange(10**4)}\n" for j in range(rnd.randrange(5, 60)))
            text = noise + KINDS[i % len(KINDS)].format(
                a=rnd.randrange(10, 900), b=rnd.randrange(1, 64), c=rnd.randrange(8), r=f"job{rnd.randrange(10**6)}"
            )
            (logs / f"{i:05d}.log").write_text(text)
            whole.append(text)
        concat = Path(tmp) / "all.log"
        concat.write_text("".join(whole))
        kb = [sys.executable, "-m", "kbdebug", "explain", "-q", "--format", "json"]
        start = time.perf_counter()
        out = subprocess.run([*kb, str(logs)], capture_output=True, text=True, check=False).stdout
        many = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run([*kb, str(concat)], capture_output=True, check=False)
        one = time.perf_counter() - start
    summary = json.loads(out.splitlines()[-1])["summary"]
    print(f"{args.logs} logs in a directory: {many:6.2f} s   their concatenation: {one:6.2f} s   ratio {many / one:4.2f}x (target <= 2x)")
    groups = ", ".join(f"{g['rule']} x{g['count']}" for g in summary["groups"])
    print(f"distinct crashes: {summary['crashes']} ({groups})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
