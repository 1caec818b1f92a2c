"""Apple's GPU out of memory (torch/mps/MPSAllocator.mm's message, which no CPU can raise): `cuda_oom`, the cause
being the same, with its own figures (what the MPS allocator holds, other allocations, the high-watermark cap) and a
page for memory the GPU shares with the machine, not a CUDA card's tools."""

from __future__ import annotations

from kbdebug import diagnose_text

MPS = (
    "Traceback (most recent call last):\n"
    '  File "/Users/maria/dev/train.py", line 211, in <module>\n'
    "    loss.backward()\n"
    "RuntimeError: MPS backend out of memory (MPS allocated: 17.88 GB, other allocations: 1.23 GB, max allowed: 18.13 GB). "
    "Tried to allocate 256.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory "
    "allocations (may cause system failure).\n"
)


def test_an_mps_out_of_memory_reads_its_figures() -> None:
    root = diagnose_text(MPS).root
    assert root is not None
    assert (root.rule, root.title) == ("cuda_oom", "Apple GPU (MPS) out of memory")
    facts = {k: root.facts.get(k) for k in ("oom_device", "tried_to_allocate", "allocated_by_pytorch", "other_allocations", "allowed")}
    assert facts == {
        "oom_device": "MPS",
        "tried_to_allocate": "256.00 MB",
        "allocated_by_pytorch": "17.88 GB",
        "other_allocations": "1.23 GB",
        "allowed": "18.13 GB",
    }


def test_its_page_is_for_memory_shared_with_the_machine() -> None:
    root = diagnose_text(MPS).root
    assert root is not None
    text = " ".join(" ".join(str(root.guide.get(k, "")) for k in ("what", "why", "confirm", "fix")).split())
    assert "holds 17.88 GB and other allocations 1.23 GB, against its limit of 18.13 GB" in text
    assert "torch.mps.empty_cache()" in text and "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0" in text
    assert "nvidia-smi" not in text and "expandable_segments" not in text


def test_a_cuda_out_of_memory_names_no_other_device() -> None:
    cuda = MPS.splitlines()[0] + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    root = diagnose_text(cuda).root
    assert root is not None and root.title == "CUDA out of memory" and "oom_device" not in root.facts
