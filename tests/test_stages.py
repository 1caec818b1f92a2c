"""The diagnose stage's steps take values and return values, each visited once, in order: following one log
from `explain` to its text never returns to a step already left."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from kbdebug.api import diagnose_text
from kbdebug.render import render

STEPS = ("match", "lines", "context", "guides", "signature")
# a step's own helper modules: what a plain Python error names is context; the inference from indicator phrases and
# what the match stage keeps of the rules are the match step's
PART_OF = {"plain": "context", "inference": "match", "memo": "match"}

LOG = """\
/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss2d_forward_out_cuda_kernel: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss2d_forward_out_cuda_kernel: block: [0,0,0], thread: [6,0,0] Assertion `t >= 0 && t < n_classes` failed.
[rank1]:[E501 12:03:11.123456 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.
Traceback (most recent call last):
  File "train.py", line 42, in <module>
    loss.item()
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""


def _rooms(run: Any) -> list[str]:
    """The diagnoser steps entered while `run()` runs, in order, each stay counted once."""
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("kbdebug.diagnoser.") and module != "kbdebug.diagnoser.pipeline":
            room = module.rsplit(".", 1)[-1]
            room = PART_OF.get(room, room)
            if not entered or entered[-1] != room:
                entered.append(room)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entered


def test_one_log_from_explain_to_its_text_visits_each_step_once_in_order() -> None:
    diag = diagnose_text(LOG)  # warm: the knowledge base and the parsers are loaded before the trace
    assert [i.rule for i in diag.incidents][:1] == ["nll_target_out_of_range"] and diag.root and diag.root.consequences
    rooms = _rooms(lambda: render([diagnose_text(LOG)], "text"))
    assert rooms == list(STEPS)


def test_a_guide_is_filled_once_from_the_facts_never_patched_after() -> None:
    """`rerun` is a fact the guide quotes: the command that reruns the job as it was launched."""
    diag = diagnose_text(LOG.replace('File "train.py"', 'File "/srv/job/run_seg.py"'))
    root = diag.root
    assert root is not None
    assert "CUDA_LAUNCH_BLOCKING=1 python /srv/job/run_seg.py" in root.commands
