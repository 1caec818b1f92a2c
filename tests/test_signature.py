"""Crash signatures (same crash, same signature; another cause or site, another one) and ranks: the causal
rank is the root, the other ranks' collective timeouts fold under it with their rank list."""

from __future__ import annotations

import sys

import pytest

from kbdebug.api import diagnose_text
from kbdebug.diagnoser.signature import normalise_message
from kbdebug.normalise import lines_of
from kbdebug.render.words import consequence_summary, rank_list

ASSERT = (
    "{prefix}/opt/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:{line}: operator(): block: [{b},0,0], "
    'thread: [{t},0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
    '{prefix}Traceback (most recent call last):\n{prefix}  File "{root}/train.py", line {uline}, in step\n'
    "{prefix}    loss = crit(logits.gather(1, idx), y)\n{prefix}RuntimeError: CUDA error: device-side assert triggered\n"
)
OOM = (
    'Traceback (most recent call last):\n  File "{root}/train.py", line {uline}, in step\n    out = model(x)\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n}.00 GiB. GPU {g} has a total capacity of 79.15 GiB\n"
)


def sig(text: str) -> str:
    root = diagnose_text(text).root
    assert root is not None
    return root.signature


def test_same_crash_in_another_run_rank_and_paste_has_one_signature() -> None:
    a = sig(ASSERT.format(prefix="", line=365, b=4, t=9, root="/home/a", uline=88))
    variants = [
        ASSERT.format(prefix="", line=365, b=210, t=31, root="/scratch/job-77", uline=91),  # other run, block, line
        ASSERT.format(prefix="[rank5]:", line=365, b=4, t=9, root="/home/a", uline=88),  # another rank
        "".join(
            f"2025-03-01 10:00:0{i},000 - ERROR - {ln}\n"
            for i, ln in enumerate(ASSERT.format(prefix="", line=365, b=4, t=9, root="/home/a", uline=88).splitlines())
        ),  # timestamped
        ASSERT.format(prefix="", line=365, b=4, t=9, root="/home/a", uline=88).replace("\n", "\r\n"),  # CRLF
        "".join("> " + ln + "\n" for ln in ASSERT.format(prefix="", line=365, b=4, t=9, root="/home/a", uline=88).splitlines()),
        "step 1 loss 0.3\n" * 500 + ASSERT.format(prefix="", line=365, b=4, t=9, root="/home/a", uline=88) + "step 2\n" * 20,
    ]
    assert {sig(v) for v in variants} == {a}


def prefixed(text: str, prefix: str) -> str:
    return "".join(prefix + ln + "\n" for ln in text.splitlines())


def test_inline_code_line_keeps_its_signature_when_quoted_ranked_or_stamped() -> None:
    """A message pasted as Markdown inline code, then quoted in a reply or prefixed by a launcher: the
    backticks follow the prefix and are dropped there as they are on a bare line."""
    text = "`RuntimeError: The NVIDIA driver on your system is too old (found version 11020). Please update it.`\n"
    root = diagnose_text(text).root
    assert root is not None and "RuntimeError: The NVIDIA driver on your system is too old" in root.signature_key
    for prefix in ("> ", "[rank3]: ", "2024-05-01 12:00:01,007 - ERROR - "):
        assert sig(prefixed(text, prefix)) == root.signature, prefix


def test_a_prefixed_blank_line_is_blank_and_the_user_frame_after_it_is_kept() -> None:
    """A launcher or a logging handler prefixes the blank lines too: `[default3]:` alone is a blank line,
    not an exception message after a frame's source line, so the cut traceback around it still locates
    the user's call."""
    text = (
        "RuntimeError: CUDA error: invalid device ordinal\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/w/run.py", line 10, in <module>\n'
        "    main()\n"
        '  File "/w/run.py", line 5, in main\n'
        "    torch.cuda.set_device(7)\n"
        "\n"
        '  File "/usr/lib/python3.10/site-packages/torch/cuda/__init__.py", line 350, in set_device\n'
        "    torch._C._cuda_setDevice(device)\n"
    )
    root = diagnose_text(text).root
    assert root is not None and root.signature_key.endswith("| at run.py:main")
    for prefix in ("[default3]:", "[rank3]: ", "3: ", "2024-05-01 12:00:01,007 - ERROR - "):
        assert sig(prefixed(text, prefix)) == root.signature, prefix


def test_torchrun_tee_prefix_keeps_the_lines_own_indentation() -> None:
    """torchrun's TailLog writes `[default5]:` and the line verbatim: a source line indented by one space
    stays indented (it is the failing op read outside a traceback), so the cause read from it stays."""
    text = (
        " tp = torch.sum(targets * preds, dim=(2, 3))\n"
        "RuntimeError: The size of tensor a (4) must match the size of tensor b (21) at non-singleton dimension 1\n"
    )
    root = diagnose_text(text).root
    assert root is not None
    tee = diagnose_text(prefixed(text, "[default5]:")).root
    assert tee is not None and (tee.rule, tee.signature) == (root.rule, root.signature)
    assert lines_of(prefixed('  File "/w/a.py", line 3, in f\n', "[default0]:"))[0].text == '  File "/w/a.py", line 3, in f'


def test_other_cause_or_other_site_is_another_signature() -> None:
    base = sig(ASSERT.format(prefix="", line=365, b=4, t=9, root="/r", uline=88))
    oom_a = sig(OOM.format(root="/r", uline=88, n=2, g=0))
    assert oom_a == sig(OOM.format(root="/other", uline=120, n=38, g=3))  # sizes, GPU and line vary: same crash
    other_site = sig(ASSERT.format(prefix="", line=365, b=4, t=9, root="/r", uline=88).replace("train.py", "eval.py"))
    assert len({base, oom_a, other_site}) == 3


def test_signature_key_is_readable_and_run_independent() -> None:
    root = diagnose_text(OOM.format(root="/home/u/proj", uline=42, n=2, g=1)).root
    assert root is not None
    assert root.signature_key == (
        "cuda_oom | torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <n> GiB. GPU <n> h | at train.py:step"
    )
    assert len(root.signature) == 12 and int(root.signature, 16) >= 0
    assert normalise_message("at 0x7f3a21 in /usr/lib/x.so on 2024-01-02 12:00:01.5 'foo' 7") == "at <addr> in x.so on <time> <name> <n>"


def test_dev_corpus_signatures_survive_damage_and_never_cross_rules(corpus) -> None:
    sys.path.insert(0, str(corpus.parent.parent / "tools"))
    mutate = pytest.importorskip("mutate_eval")
    kept = total = 0
    by_signature: dict[str, set[str]] = {}
    for log in sorted(corpus.glob("*.log")):
        text = log.read_bytes().decode("utf-8", "replace")
        root = diagnose_text(text).root
        if root is None:
            continue
        by_signature.setdefault(root.signature, set()).add(root.rule)
        for name in ("wrap80", "quoted", "rank_prefix", "timestamps", "crlf_ansi", "in_noise"):
            damaged = getattr(mutate, name)(text, mutate._rng(log.stem, name))
            if damaged is None:
                continue
            total += 1
            other = diagnose_text(damaged).root
            kept += other is not None and other.signature == root.signature
    # every damaged log keeps its signature (the families that once lost it have their own fixtures in
    # tests/test_normalise_damage.py)
    assert kept == total, f"{kept}/{total} keep their signature"
    assert all(len(rules) == 1 for rules in by_signature.values())


def eight_ranks(causal: int = 3) -> str:
    lines = []
    for r in range(8):
        if r != causal:
            lines.append(
                f"[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum={100 + r}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                f"600{r:03d} milliseconds before timing out."
            )
    mine = ASSERT.format(prefix=f"[rank{causal}]:", line=365, b=4, t=9, root="/work", uline=88).splitlines()
    return "\n".join(lines[:2] + mine + lines[2:]) + "\n"


ELASTIC = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-03-01_10:00:00
  host      : node1
  rank      : 3 (local_rank: 3)
  exitcode  : -6 (pid: 1234)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 1234
============================================================
"""


def test_eight_ranks_fold_under_the_causal_rank() -> None:
    diag = diagnose_text(eight_ranks(causal=3) + ELASTIC)  # torchrun's ChildFailedError table folds in too
    assert [i.rule for i in diag.incidents] == ["scatter_gather_index_oob"]
    root = diag.root
    assert root is not None and root.facts["rank"] == 3
    assert "op_type" not in root.facts and "seq_num" not in root.facts  # other ranks' facts stay theirs
    nccl = next(c for c in root.consequences if c.rule == "nccl_error")
    assert nccl.ranks == [0, 1, 2, 4, 5, 6, 7]
    assert consequence_summary(nccl).startswith("ranks 0-2,4-7: NCCL watchdog timeout")
    assert nccl.facts["op_type"] == "ALLREDUCE"


def test_rank_list() -> None:
    assert rank_list([0, 1, 2, 4, 5, 6, 7]) == "0-2,4-7"
    assert rank_list([5]) == "5"
    assert rank_list([1, 3]) == "1,3"
