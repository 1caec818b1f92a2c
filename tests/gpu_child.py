"""Child process for the GPU checks: trigger one real device-side assert, three ways.

usage: python tests/gpu_child.py CASE [plain|diagnose|guard]
"""

from __future__ import annotations

import json
import os
import sys

import torch

import kbdebug
from kbdebug.render import json_object

F = torch.nn.functional
DEV = os.environ.get("KBDEBUG_TEST_DEVICE", "cuda")  # "cpu" for a dry run of this script without a GPU


def trigger(case: str) -> float:
    if case == "gather":
        src, idx = torch.randn(8, 4, device=DEV), torch.tensor([[0], [7]], device=DEV)
        out = torch.gather(src, 1, idx)  # OP-LINE gather
    elif case == "nll255":
        logits, target = torch.randn(8, 5, device=DEV), torch.tensor([0, 1, 2, 255, 1, 2, 3, 4], device=DEV)
        out = F.cross_entropy(logits, target)  # OP-LINE nll255
    elif case == "embedding":
        emb, ids = torch.nn.Embedding(100, 8).to(DEV), torch.tensor([[1, 2, 150]], device=DEV)
        out = emb(ids)  # OP-LINE embedding
    elif case == "bce_logits":
        logits, target = torch.randn(64, device=DEV) * 3, torch.ones(64, device=DEV)
        out = F.binary_cross_entropy(logits, target)  # OP-LINE bce_logits
    else:
        raise SystemExit(f"unknown case {case}")
    return out.sum().item()  # SYNC-LINE


def main() -> None:
    case, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "plain")
    if mode == "plain":
        trigger(case)
        return
    if mode == "diagnose":
        with kbdebug.capture():
            try:
                trigger(case)
            except Exception as exc:
                diag = kbdebug.diagnose(exc)
        print(json.dumps(json_object(diag)))
        return
    if mode == "audit":
        model = torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 2)).to(DEV)
        with kbdebug.audit(model, sync=True) as audit:
            try:
                model(torch.tensor([[1, 2, 150]], device=DEV)).sum().item()
            except Exception:
                pass
        failed = audit.failed
        print(json.dumps({"module": failed.module if failed else None, "type": failed.type if failed else None}))
        return
    try:
        with kbdebug.guard():
            trigger(case)
    except kbdebug.KbdebugError as err:
        print(json.dumps({"rule": err.rule, "facts": err.facts}, default=str))
        return
    print(json.dumps({"rule": None}))


if __name__ == "__main__":
    main()
