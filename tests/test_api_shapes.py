"""`diagnose(exc)` on the shape, target and one-hot errors CPU torch really raises: the rule and the shapes.

Each case raises the error the way user code does (the tensors are named on the failing line, so
the frame's tensors are evidence too); the expected rule follows rule-ids.md's boundaries.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import kbdebug  # noqa: E402


def ce_label_with_channel_dim() -> None:
    logits, target = torch.randn(2, 5, 4, 4), torch.randint(0, 5, (2, 1, 4, 4))
    F.cross_entropy(logits, target)


def ce_float_target() -> None:
    logits, target = torch.randn(4, 5), torch.tensor([1.0, 2.0, 3.0, 0.0])
    F.cross_entropy(logits, target)


def ce_spatial_sizes_differ() -> None:
    logits, target = torch.randn(2, 5, 4, 4), torch.randint(0, 5, (2, 4, 5))
    F.cross_entropy(logits, target)


def ce_target_too_large() -> None:
    logits, target = torch.randn(2, 5), torch.tensor([1, 7])
    F.cross_entropy(logits, target)


def ce_batch_differs() -> None:
    logits, target = torch.randn(4, 5), torch.randint(0, 5, (3,))
    F.cross_entropy(logits, target)


def one_hot_value_too_large() -> None:
    labels = torch.tensor([0, 3, 7])
    F.one_hot(labels, num_classes=5)


def bce_rgb_mask_vs_one_channel_logits() -> None:
    masks_pred, true_masks = torch.randn(1, 1, 8, 8), torch.rand(1, 3, 8, 8)
    F.binary_cross_entropy_with_logits(masks_pred, true_masks)


def bce_one_channel_label_vs_c_channel_logits() -> None:
    logits, label = torch.randn(2, 4, 8, 8), torch.rand(2, 1, 8, 8)
    F.binary_cross_entropy_with_logits(logits, label)


def dice_written_in_plain_torch() -> None:
    pred = torch.softmax(torch.randn(2, 14, 8, 8, 8), 1)
    label = F.one_hot(torch.randint(0, 13, (2, 8, 8, 8)), 13).permute(0, 4, 1, 2, 3).float()
    (pred * label).sum()


def onehot_by_scatter() -> None:
    y = torch.randint(0, 20, (1, 1, 8, 8))
    y[0, 0, 0, 0] = 25
    y_onehot = torch.zeros(1, 23, 8, 8)
    y_onehot.scatter_(1, y, 1)


def bce_probabilities_out_of_range() -> None:
    F.binary_cross_entropy(torch.tensor([-0.5, 0.2, 1.7, 0.4]), torch.tensor([0.0, 1.0, 1.0, 0.0]))  # logits, not probabilities


CASES: list[tuple[Callable[[], None], str, dict]] = [
    (ce_label_with_channel_dim, "target_shape_mismatch", {}),
    (ce_float_target, "target_shape_mismatch", {"found": "Float"}),
    (ce_spatial_sizes_differ, "target_shape_mismatch", {"input_shape": [2, 5, 4, 4], "target_shape": [2, 4, 5]}),
    (ce_target_too_large, "nll_target_out_of_range", {"target": 7}),
    (ce_batch_differs, "batch_size_mismatch", {"input_batch": 4, "target_batch": 3}),
    (one_hot_value_too_large, "channel_onehot_mismatch", {}),
    (
        bce_rgb_mask_vs_one_channel_logits,
        "channel_onehot_mismatch",
        {"input_shape": [1, 1, 8, 8], "target_shape": [1, 3, 8, 8], "shape_relation": "channel"},
    ),
    (bce_one_channel_label_vs_c_channel_logits, "channel_onehot_mismatch", {"input_channels": 4, "target_channels": 1}),
    (dice_written_in_plain_torch, "channel_onehot_mismatch", {"shapes": [[2, 14, 8, 8, 8], [2, 13, 8, 8, 8]]}),
    (onehot_by_scatter, "channel_onehot_mismatch", {}),
    (bce_probabilities_out_of_range, "bce_input_out_of_range", {}),
]


@pytest.mark.parametrize(("fn", "rule", "facts"), CASES, ids=[c[0].__name__ for c in CASES])
def test_live_error_names_its_rule_and_shapes(fn: Callable[[], None], rule: str, facts: dict) -> None:
    with pytest.raises(Exception) as info:
        fn()
    root = kbdebug.diagnose(info.value).root
    assert root is not None and root.rule == rule
    for key, val in facts.items():
        assert root.facts[key] == val
    assert root.facts["innermost_user_frame"].startswith(__file__)
