"""The fix follows the relation between the user's shapes and names their numbers: label `[B,1,...]` vs
logits `[B,C,...]`, a C-channel label vs 1-channel logits, one-hot vs index labels, for cross_entropy,
BCE and a Dice-style loss written in plain torch (live CPU errors: the failing line's tensors count)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import kbdebug  # noqa: E402


def fix_of(fn) -> tuple[str, str]:
    with pytest.raises(Exception) as info:
        fn()
    root = kbdebug.diagnose(info.value).root
    assert root is not None
    return root.rule, root.guide["fix"]


def test_bce_rgb_label_against_one_channel_logits() -> None:
    def run() -> None:
        logits, mask = torch.randn(1, 1, 8, 8), torch.rand(1, 3, 8, 8)
        F.binary_cross_entropy_with_logits(logits, mask)

    rule, fix = fix_of(run)
    assert rule == "channel_onehot_mismatch"
    assert 'convert("L")' in fix and "`out_channels=3`" in fix and "squeeze" not in fix


def test_bce_index_label_against_c_channel_logits() -> None:
    def run() -> None:
        logits, label = torch.randn(2, 4, 8, 8), torch.rand(2, 1, 8, 8)
        F.binary_cross_entropy_with_logits(logits, label)

    rule, fix = fix_of(run)
    assert rule == "channel_onehot_mismatch"
    assert "4-channel" in fix and "F.one_hot(label.squeeze(1).long(), 4)" in fix and "`out_channels=1`" in fix


def test_dice_style_one_hot_label_with_too_few_channels() -> None:
    def run() -> None:
        pred = torch.softmax(torch.randn(2, 14, 4, 4, 4), 1)
        label = F.one_hot(torch.randint(0, 13, (2, 4, 4, 4)), 13).permute(0, 4, 1, 2, 3).float()
        (pred * label).sum()

    rule, fix = fix_of(run)
    assert rule == "channel_onehot_mismatch"
    assert "`out_channels` (14 now)" in fix and "one-hot size (13 now" in fix


def test_dice_style_index_label_against_c_channel_prediction() -> None:
    def run() -> None:
        pred = torch.softmax(torch.randn(2, 5, 4, 4), 1)
        label = torch.randint(0, 5, (2, 3, 4, 4)).float()  # three stacked index maps: not one-hot, not one channel
        (pred - label).abs().mean()

    rule, fix = fix_of(run)
    assert rule == "channel_onehot_mismatch"
    assert "`out_channels` (5 now)" in fix and "(3 now" in fix


def test_cross_entropy_label_with_channel_dim() -> None:
    def run() -> None:
        logits, target = torch.randn(2, 5, 4, 4), torch.randint(0, 5, (2, 1, 4, 4))
        F.cross_entropy(logits, target)

    rule, fix = fix_of(run)
    assert rule == "target_shape_mismatch"
    assert "target.squeeze(1).long()" in fix and "target.argmax(1)" in fix


def test_cross_entropy_one_hot_float_label() -> None:
    def run() -> None:
        logits, onehot = torch.randn(4, 5), F.one_hot(torch.tensor([0, 1, 2, 3]), 5).float()[:, None, :]
        F.cross_entropy(logits, onehot)

    rule, fix = fix_of(run)
    assert rule == "target_shape_mismatch"
    assert "argmax(1)" in fix or ".long()" in fix


def test_cross_entropy_spatial_sizes_name_the_prediction_size() -> None:
    def run() -> None:
        logits, target = torch.randn(2, 5, 8, 8), torch.randint(0, 5, (2, 4, 4))
        F.cross_entropy(logits, target)

    rule, fix = fix_of(run)
    assert rule == "target_shape_mismatch"
    assert "nearest" in fix and "[8, 8]" in fix
