"""Each check's advice, word for word, on the cases where it used to contradict itself or stay silent."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from kbdebug import diagnose  # noqa: E402
from kbdebug.api import Diagnosis  # noqa: E402  # the public result: render() and verify()
from kbdebug.diagnosis import Incident  # noqa: E402
from kbdebug.verify import check_bce_inputs, check_class_targets, check_segmentation  # noqa: E402

HEAD_14_VS_13 = (
    "the labels have 14 classes (0..13) and the head 13: set the model's output channels to 14 "
    "(keep to_onehot=14), or, if 13 is right, find where label 13 comes from"
)


def test_segmentation_head_smaller_than_labels_names_the_decision() -> None:
    label = torch.arange(14).reshape(1, 1, 2, 7).repeat(2, 1, 1, 1)
    pred = torch.randn(2, 13, 2, 7)
    res = check_segmentation(label, pred, to_onehot=14, to_onehot_y=True, softmax=True)
    assert res.passed is False
    assert res.fix == HEAD_14_VS_13
    assert "255" not in res.fix and "to_onehot=13" not in res.fix
    assert res.finding == "label values 13 outside [0, 13) for a prediction with 13 channels (labels 0..13)"


def test_segmentation_to_onehot_differs_from_a_head_that_fits_the_labels() -> None:
    label = torch.tensor([0, 3, 5]).reshape(1, 1, 3)
    res = check_segmentation(label, torch.randn(1, 6, 3), to_onehot=5)
    assert res.finding == "to_onehot=5 but the prediction has 6 channels (labels reach 5)"
    assert res.fix == "AsDiscrete(to_onehot=6) (the head's channel count)"


def test_segmentation_ignore_value_is_named_as_such() -> None:
    label = torch.tensor([0, 1, 255, 2]).reshape(1, 1, 4)
    res = check_segmentation(label, torch.randn(1, 3, 4), to_onehot_y=True)
    assert res.fix == "255 looks like an 'ignore' label: pass ignore_index=255 to the loss, or remap it before the loss"
    assert res.values["real_class_count"] == 3


def test_class_targets_ignore_value() -> None:
    res = check_class_targets(torch.tensor([0, 255, 2, 255]), num_classes=5)
    assert res.fix == "255 looks like an 'ignore' label: pass ignore_index=255 to the loss (it is -100), or remap it before the loss"
    assert res.values["offending_counts"] == {"255": 2}


def test_class_targets_ignore_value_and_a_real_out_of_range_label_together() -> None:
    res = check_class_targets(torch.tensor([0, 255, 5, 1]), num_classes=5)
    assert res.fix == (
        "255 looks like an 'ignore' label: pass ignore_index=255 to the loss (it is -100), or remap it before the loss; "
        "the labels have 6 classes (0..5) and the head 5: set the model's output size to 6, "
        "or, if 5 is right, find where label 5 comes from"
    )


def test_class_targets_one_based() -> None:
    res = check_class_targets(torch.tensor([[1, 5, 2]]), num_classes=5)
    assert res.fix == (
        "labels look 1-based (min 1, max 5 for 5 classes): use target - 1, or, if label 0 is a real class too, the model's output size 6"
    )


def test_class_targets_off_by_one() -> None:
    res = check_class_targets(torch.tensor([0, 1, 2, 3, 4]), num_classes=4)
    assert res.fix == (
        "the labels have 5 classes (0..4) and the head 4: set the model's output size to 5, "
        "or, if 4 is right, find where label 4 comes from"
    )


def test_class_targets_head_too_small() -> None:
    res = check_class_targets(torch.tensor([0, 3, 9, 12]), logits=torch.randn(4, 8))
    assert res.fix == (
        "the labels have 13 classes (0..12) and the head 8: set the model's output size to 13, "
        "or, if 8 is right, find where labels 9, 12 come from"
    )


def test_class_targets_negative_padding() -> None:
    res = check_class_targets(torch.tensor([0, -2, 1]), num_classes=3)
    assert res.fix == "negative labels (-2): remap them into [0, 3) or set ignore_index to the padding value"


def test_verify_and_check_class_targets_give_one_answer() -> None:
    mask, logits = torch.tensor([[0, 255], [5, 1]]), torch.randn(2, 5, 2)
    diag = Diagnosis(incidents=[Incident(rule="nll_target_out_of_range", title="t", confidence=0.9, checks=["class_targets"])])
    diag.verify(target=mask, logits=logits)
    assert diag.root is not None
    assert diag.root.verification[0]["fix"] == check_class_targets(mask, logits=logits).fix
    assert "256 outputs" not in diag.root.verification[0]["fix"]


def test_bce_reports_a_bad_target_even_when_the_input_is_fine() -> None:
    res = check_bce_inputs(torch.tensor([0.2, 0.7]), torch.tensor([0.0, 2.0]))
    assert res.passed is False and res.finding == "target: 1 above 1 (max 2)"
    assert res.fix == (
        "the target holds whole numbers up to 2: BCE targets are probabilities in [0, 1]; "
        "for 3 class indices use cross_entropy, for a binary mask (target > 0).float()"
    )


def test_bce_reports_input_and_target_together() -> None:
    res = check_bce_inputs(torch.tensor([-1.5, 0.7]), torch.tensor([0.0, 255.0]))
    assert res.finding == "input: 1 negative (min -1.5); target: 1 above 1 (max 255)"
    assert res.fix == (
        "these look like logits: apply sigmoid first, or use BCEWithLogitsLoss / bernoulli(logits=...); "
        "the target is a 0..255 mask: binarise it, (target > 0).float(), or scale it, target / 255"
    )


def test_verify_without_arguments_uses_the_failing_line() -> None:
    logits, mask = torch.randn(4, 5), torch.tensor([0, 255, 1, 2])
    try:
        F.cross_entropy(logits, mask)
    except IndexError as exc:
        diag = diagnose(exc)
    diag.verify()
    assert diag.root is not None and diag.root.verification[0]["passed"] is False
    assert diag.root.verification[0]["values"]["max"] == 255
    assert diag.root.verification[0]["fix"].startswith("255 looks like an 'ignore' label: pass ignore_index=255")


def test_verify_without_arguments_reads_literal_settings_of_the_call() -> None:
    labels = torch.tensor([0, 3, 7])
    try:
        F.one_hot(labels, num_classes=5)
    except RuntimeError as exc:
        diag = diagnose(exc)
    diag.verify()
    assert diag.root is not None
    ran = {v["name"]: v for v in diag.root.verification}
    assert ran["class_targets"]["values"]["num_classes"] == 5 and ran["class_targets"]["values"]["max"] == 7
    assert ran["class_targets"]["offending"] == [7]


def test_other_checks_name_the_values_they_found() -> None:
    from kbdebug.verify import check_finite, check_probabilities, check_shapes, check_target_dtype

    res = check_probabilities(torch.tensor([[0.0, 0.0], [0.3, 0.7], [0.2, 0.8]]))
    assert res.fix == "1 rows are all zeros (every option masked out): keep at least one positive entry or add a small epsilon"
    res = check_probabilities(torch.tensor([0.5, float("nan"), float("nan")]))
    assert res.fix.startswith("2 NaN / 0 inf came from upstream")
    res = check_finite(loss=torch.tensor(float("inf")), x=torch.ones(2))
    assert res.fix == "find the first stage that produces them in loss: kbdebug.audit(model) records nan/inf per module"
    res = check_shapes(feats=torch.zeros(3, 12), w=torch.zeros(2, 2), error_shapes=[[3, 12]])
    assert res.fix == "fix the layout of feats (view/permute/squeeze) or the size of the layer it meets"
    res = check_target_dtype(torch.tensor([1, 0], dtype=torch.uint8))
    assert res.fix == "target = target.long()  (an index mask loaded as uint8 must be converted)"
    res = check_class_targets(torch.tensor([1.0, 2.0]), num_classes=3)
    assert res.fix == "target = target.long()  (it is float32; check the values are whole class numbers first)"
