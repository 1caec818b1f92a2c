"""Advice that fits the op that failed (#37), each case from a user's small CPU script: the error is raised
live, diagnosed from the exception (`diagnose(exc)`, then `diag.verify()` on the failing line's tensors) and
from its printed traceback (what `kbdebug explain` reads). The fix must be one that runs, with the user's
names, and never one that would still fail (`unsqueeze(1)` on class indices against `[B, C, H, W]`) or
silently corrupt the data (`view` on a channels-last tensor)."""

from __future__ import annotations

import runpy
import traceback
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kbdebug import diagnose, diagnose_text  # noqa: E402
from kbdebug.diagnosis import Diagnosis  # noqa: E402
from kbdebug.verify import check_segmentation  # noqa: E402


def raise_from(tmp_path: Path, script: str) -> tuple[Diagnosis, Diagnosis]:
    """Run the user's script; return the live diagnosis (verified) and the one read from its traceback."""
    path = tmp_path / "train.py"
    path.write_text(script)
    try:
        runpy.run_path(str(path), run_name="__main__")
    except Exception as exc:  # the user's error, as their run raised it
        live = diagnose(exc).verify()
        logged = diagnose_text("".join(traceback.format_exception(exc)))
        return live, logged
    raise AssertionError("the script did not fail")


BCE_INDEX = """import torch
import torch.nn as nn

logits = torch.randn(2, 4, 32, 32)
masks = torch.randint(0, 4, (2, 32, 32))
criterion = nn.BCEWithLogitsLoss()
loss = criterion(logits, masks.float())
"""


def test_bce_on_class_indices_gets_cross_entropy_or_a_permuted_one_hot(tmp_path: Path) -> None:
    live, logged = raise_from(tmp_path, BCE_INDEX)
    for diag in (live, logged):
        inc = diag.incidents[0]
        assert inc.rule == "target_shape_mismatch"
        fix = inc.guide["fix"]
        assert "`loss = nn.CrossEntropyLoss()(logits, masks.long())`" in fix
        assert "`loss = criterion(logits, F.one_hot(masks.long(), 4).permute(0, 3, 1, 2).float())`" in fix
        assert "unsqueeze" not in fix and "view" not in fix  # [2, 1, 32, 32] would still fail
    # the verifier checks BCE's contract (the target in the input's shape) and fails it: confidence goes up
    inc = live.incidents[0]
    assert inc.confidence == 0.99 and live.notes == []
    results = {r["name"]: r for r in inc.verification}
    seg = results["segmentation_layout"]
    assert seg["passed"] is False
    assert seg["finding"] == "binary cross-entropy needs the target in the input's shape: target [2, 32, 32], input [2, 4, 32, 32]"
    assert "nn.CrossEntropyLoss()(logits, masks.long())" in seg["fix"]
    assert "F.one_hot(masks.long(), 4).permute(0, 3, 1, 2).float()" in seg["fix"]
    # never cross-entropy's contract for a BCE failure; the line converts masks, so its captured dtype is not checked
    assert results["class_targets"]["passed"] is None
    assert results["target_dtype"]["passed"] is None and "masks.float()" in results["target_dtype"]["finding"]


def test_bce_with_a_channel_of_one_agrees_with_the_index_case(tmp_path: Path) -> None:
    live, _ = raise_from(tmp_path, BCE_INDEX.replace("(2, 32, 32))", "(2, 1, 32, 32))"))
    fix = live.incidents[0].guide["fix"]
    assert "F.one_hot(masks.squeeze(1).long(), 4).permute(0, 3, 1, 2).float()" in fix
    assert "masks.squeeze(1).long()" in fix


BCE_ON_LOGITS = """import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(8, 1)
x = torch.randn(16, 8)
y = torch.randint(0, 2, (16, 1)).float()
logits = model(x) * 10
loss = F.binary_cross_entropy(logits, y)
"""


def test_bce_on_logits_is_verified_with_bce_inputs_on_the_failing_lines_tensors(tmp_path: Path) -> None:
    live, logged = raise_from(tmp_path, BCE_ON_LOGITS)
    assert [i.rule for i in logged.incidents] == ["bce_input_out_of_range"]
    inc = live.incidents[0]
    assert inc.rule == "bce_input_out_of_range" and inc.confidence == 0.99
    [res] = inc.verification
    assert res["name"] == "bce_inputs" and res["passed"] is False  # not "not run: pass probs="
    assert res["fix"].startswith("these look like logits: apply sigmoid first, or use BCEWithLogitsLoss")


def test_a_passing_check_of_the_right_op_lowers_and_a_missing_tensor_does_not(tmp_path: Path) -> None:
    live, _ = raise_from(tmp_path, BCE_INDEX)
    again = live.verify(logits=torch.randn(2, 4, 32, 32))  # masks still the captured one: the same verdict
    assert again.incidents[0].confidence == 0.99
    bare = diagnose_text(BCE_INDEX_TRACEBACK).verify()  # no tensors at all: nothing ran, nothing lowered
    assert bare.incidents[0].confidence == 0.9 and bare.notes == []


BCE_INDEX_TRACEBACK = """Traceback (most recent call last):
  File "train.py", line 7, in <module>
    loss = criterion(logits, masks.float())
  File "torch/nn/functional.py", line 3689, in binary_cross_entropy_with_logits
    raise ValueError(
ValueError: Target size (torch.Size([2, 32, 32])) must be the same as input size (torch.Size([2, 4, 32, 32]))
"""


ONE_HOT_LAST = """import torch
import torch.nn as nn
import torch.nn.functional as F

logits = torch.randn(2, 4, 32, 32)
masks = torch.randint(0, 4, (2, 32, 32))
target = F.one_hot(masks, 4).float()
loss = nn.BCEWithLogitsLoss()(logits, target)
"""


def test_one_hot_with_classes_last_gets_permute_never_view(tmp_path: Path) -> None:
    live, logged = raise_from(tmp_path, ONE_HOT_LAST)
    for diag in (live, logged):
        inc = diag.incidents[0]
        assert inc.facts["channels_last"] == "label"
        fix = inc.guide["fix"]
        assert fix.startswith("Move the last dim to dim 1 with a permute: `target = target.permute(0, 3, 1, 2)`")
        assert "Never a `view`" in fix and "interpolate" not in fix
    seg = {r["name"]: r for r in live.incidents[0].verification}["segmentation_layout"]
    assert seg["passed"] is False and seg["fix"].startswith("the target has its classes last: target = target.permute(0, 3, 1, 2)")


def test_check_segmentation_names_a_channels_last_label_and_its_permute() -> None:
    label = torch.nn.functional.one_hot(torch.randint(0, 14, (2, 16, 16, 16)), 14).float()
    res = check_segmentation(label, torch.randn(2, 14, 16, 16, 16))
    assert res.passed is False
    assert res.values["label_layout"] == "one-hot, classes last"
    assert "channels-last" in res.finding and "fits neither" not in res.finding
    assert res.fix.startswith("label = label.permute(0, 4, 1, 2, 3)")


NO_CUDA_TRACEBACK = """Traceback (most recent call last):
  File "train.py", line 3, in <module>
    x = torch.zeros(3).cuda()
  File "torch/cuda/__init__.py", line 403, in _lazy_init
    raise AssertionError("Torch not compiled with CUDA enabled")
AssertionError: Torch not compiled with CUDA enabled
"""


def test_torch_without_cuda_is_a_cpu_build_to_replace_not_a_driver(tmp_path: Path) -> None:
    diags = [diagnose_text(NO_CUDA_TRACEBACK)]
    if not torch.cuda.is_available() and torch.version.cuda is None:  # this torch raises it live too
        diags.extend(raise_from(tmp_path, "import torch\n\nx = torch.zeros(3).cuda()\n"))
    for diag in diags:
        inc = diag.incidents[0]
        assert inc.rule == "driver_error"  # the id rule-ids.md gives the message
        assert inc.title == "PyTorch installed without CUDA (a CPU-only build)"
        assert inc.guide["fix"].startswith("Install a CUDA build of PyTorch")
        assert "--index-url https://download.pytorch.org/whl/cu" in inc.guide["fix"]
        assert "update the NVIDIA driver" not in inc.guide["fix"]
    old_driver = diagnose_text("RuntimeError: Found no NVIDIA driver on your system.\n").incidents[0]
    assert old_driver.rule == "driver_error" and old_driver.guide["fix"].startswith("Install or update the NVIDIA driver")


LABEL_IS_CLASS_COUNT = """import torch
import torch.nn.functional as F

logits = torch.randn(4, 4)
labels = torch.tensor([1, 2, 3, 4])
loss = F.cross_entropy(logits, labels)
"""


def test_a_label_equal_to_the_class_count_is_never_fixed_with_ignore_index(tmp_path: Path) -> None:
    live, logged = raise_from(tmp_path, LABEL_IS_CLASS_COUNT)
    assert live.incidents[0].guide["fix"].startswith("Shift the labels: `labels - 1`")
    fix = logged.incidents[0].guide["fix"]  # from the log: no class count, only the value
    assert fix.startswith("Find where label 4 comes from: labels that run 1..4 (1-based) need shifting, `labels - 1`")
    assert "give the head (and `num_classes`) 5 outputs" in fix
    assert fix.count("ignore_index=4") == 1 and 'Not `ignore_index=4`: that is for a "no label" value' in fix
    assert "pass it as `ignore_index`" not in fix


HUGE_ALLOCATION = """import torch

n_frames = 200_000
frames = torch.empty(n_frames, 1_000_000, dtype=torch.float32)
"""


def test_one_host_allocation_larger_than_any_ram_is_a_shape_or_unit_bug(tmp_path: Path) -> None:
    live, logged = raise_from(tmp_path, HUGE_ALLOCATION)
    for diag in (live, logged):
        inc = diag.incidents[0]
        assert inc.rule == "host_oom" and inc.retry == "no"  # not "rerun with less"
        assert "one request for 745 GiB" in inc.guide["what"]
        assert "shape or unit bug" in inc.guide["why"]
        assert inc.guide["fix"].startswith("Fix the shape or unit that makes the request 745 GiB")
        assert "800000000000 bytes" not in inc.guide["why"] + inc.guide["confirm"] + inc.guide["fix"]
        assert "num_workers" not in inc.guide["fix"]
        assert "Windows" not in "\n".join(inc.guide.values())  # a Linux log


def test_the_paging_file_sentence_only_for_a_windows_log() -> None:
    win = diagnose_text(
        "Traceback (most recent call last):\n"
        '  File "C:\\\\work\\\\train.py", line 40, in <module>\n'
        "    for batch in loader:\n"
        "OSError: [WinError 1455] The paging file is too small for this operation to complete.\n"
    ).incidents[0]
    assert win.rule == "host_oom" and "On Windows, `The paging file is too small`" in win.guide["why"]
    assert "a larger paging file" in win.guide["fix"]
    linux = diagnose_text("RuntimeError: DataLoader worker (pid 77) is killed\nMemoryError\n").incidents[0]
    assert "Windows" not in "\n".join(linux.guide.values()) and "paging file" not in "\n".join(linux.guide.values())


def test_check_shapes_gives_a_permute_for_a_channels_last_tensor_never_a_view() -> None:
    from kbdebug.verify import check_shapes

    res = check_shapes(target=torch.zeros(2, 32, 32, 4), logits=torch.zeros(2, 4, 32, 32), error_shapes=[[2, 32, 32, 4], [2, 4, 32, 32]])
    assert res.passed is False
    assert res.fix == "target has its channels last: target = target.permute(0, 3, 1, 2) (never a view: it would scramble)"


def test_verify_on_a_channel_of_one_agrees_with_the_guide(tmp_path: Path) -> None:
    live, _ = raise_from(tmp_path, BCE_INDEX.replace("(2, 32, 32))", "(2, 1, 32, 32))"))
    seg = {r["name"]: r for r in live.incidents[0].verification}["segmentation_layout"]
    assert seg["passed"] is False
    assert "nn.CrossEntropyLoss()(logits, masks.squeeze(1).long())" in seg["fix"]
    assert "F.one_hot(masks.squeeze(1).long(), 4).permute(0, 3, 1, 2).float()" in seg["fix"]
