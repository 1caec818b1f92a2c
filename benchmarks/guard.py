"""Overhead of `kbdebug.guard()` and `kbdebug.audit()` on a small CNN training step, as ratios to
the same step without them, measured in the same run (target: guard <= 1.3x on CPU)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

import kbdebug


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.emb = nn.Embedding(100, 64)
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor, tag: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x) + self.emb(tag))


def make_step(device: str, batch: int, size: int) -> Callable[[Callable[[], AbstractContextManager[object]]], None]:
    torch.manual_seed(0)
    model = SmallCNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, size, size, device=device)
    tag = torch.randint(0, 100, (batch,), device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step(ctx: Callable[[], AbstractContextManager[object]]) -> None:
        with ctx():
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x, tag), y)
            loss.backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    step.model = model  # type: ignore[attr-defined]
    return step


def median_ms(step: Callable[..., None], ctx: Callable[[], AbstractContextManager[object]], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step(ctx)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    step = make_step(args.device, args.batch, args.size)
    model = step.model  # type: ignore[attr-defined]
    variants: dict[str, Callable[[], AbstractContextManager[object]]] = {
        "plain": nullcontext,
        "guard": kbdebug.guard,
        "audit": lambda: kbdebug.audit(model),
        "audit(values=False)": lambda: kbdebug.audit(model, values=False),
    }
    for ctx in variants.values():  # warm up every path
        for _ in range(3):
            step(ctx)
    # interleave rounds so machine noise hits every variant alike
    results: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(3):
        for name, ctx in variants.items():
            results[name].append(median_ms(step, ctx, args.reps // 3 or 1))
    base = statistics.median(results["plain"])
    print(f"small CNN training step on {args.device}, batch {args.batch}, {args.size}x{args.size}, torch {torch.__version__}")
    for name, vals in results.items():
        ms = statistics.median(vals)
        target = "  (target <= 1.30x)" if name == "guard" else ""
        print(f"  {name:<20} {ms:8.2f} ms   {ms / base:5.2f}x{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
