"""Every verifier check on CPU tensors: the finding, the numbers, the positions, and that the
inputs are left untouched."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kbdebug import diagnose_text  # noqa: E402
from kbdebug.verify import (  # noqa: E402
    CheckResult,
    check_bce_inputs,
    check_build,
    check_class_targets,
    check_devices,
    check_divisible,
    check_embedding_ids,
    check_finite,
    check_index,
    check_oom_context,
    check_probabilities,
    check_segmentation,
    check_shapes,
    check_target_dtype,
    run_checks,
)
from kbdebug.verify.environment import _arch_ok  # noqa: E402


def unchanged(*tensors: torch.Tensor):
    """Context: the check must not modify its inputs."""
    copies = [t.clone() for t in tensors]

    class _Ctx:
        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            for t, c in zip(tensors, copies, strict=True):
                torch.testing.assert_close(t, c, rtol=0, atol=0, equal_nan=True)

    return _Ctx()


def test_class_targets_255_without_ignore_index() -> None:
    target = torch.tensor([[0, 3, 255], [1, 255, 2]])
    with unchanged(target):
        res = check_class_targets(target, num_classes=4)
    assert res.passed is False
    assert res.values["min"] == 0 and res.values["max"] == 255
    assert res.values["out_of_range"] == 2
    assert res.offending == [255]
    assert res.positions == [[0, 2], [1, 1]]
    assert res.values["histogram"] == {"0": 1, "1": 1, "2": 1, "3": 1, "255": 2}
    assert "ignore_index=255" in res.fix


def test_class_targets_honours_ignore_index_and_logits() -> None:
    logits = torch.randn(2, 4, 3)
    target = torch.tensor([[0, 3, -1], [1, -1, 2]])
    assert check_class_targets(target, logits=logits, ignore_index=-1).passed is True
    res = check_class_targets(target, logits=logits)
    assert res.passed is False and res.offending == [-1] and "ignore_index=-1" in res.fix


def test_class_targets_off_by_one_and_float() -> None:
    res = check_class_targets(torch.tensor([1, 2, 3, 4]), num_classes=4)
    assert not res.passed and "1-based" in res.fix
    res = check_class_targets(torch.tensor([0.0, 2.0]), num_classes=4)
    assert res.passed is False and "int64" in res.finding
    soft = torch.softmax(torch.randn(3, 4), 1)
    assert check_class_targets(soft, logits=torch.randn(3, 4)).passed is True


def test_index_vs_size() -> None:
    ids = torch.tensor([[5, 50257, 7], [50300, 1, 2]])
    with unchanged(ids):
        res = check_index(ids, 50257, what="input_ids")
    assert res.passed is False
    assert res.values["out_of_range"] == 2 and res.offending == [50257, 50300]
    assert res.positions == [[0, 1], [1, 0]]
    assert "at least 50301" in res.fix
    src = torch.randn(3, 4)
    assert check_index(torch.tensor([[0, 3]]), src=src, dim=1).passed
    assert not check_index(torch.tensor([[-1]]), src=src, dim=1).passed
    assert check_index(torch.tensor([[-1]]), src=src, dim=1, allow_negative=True).passed
    assert not check_index(torch.tensor([0.0]), 3).passed


def test_embedding_ids_position_ids() -> None:
    emb = torch.nn.Embedding(512, 8)
    pos = torch.arange(600).unsqueeze(0)
    res = check_embedding_ids(pos, emb, what="position_ids")
    assert res.name == "embedding_ids" and res.passed is False
    assert res.values["out_of_range"] == 88 and res.values["size"] == 512
    assert check_embedding_ids(torch.arange(10), num_embeddings=10).passed


def test_segmentation_index_label_with_channel_dim() -> None:
    label = torch.randint(0, 14, (2, 1, 4, 4, 4))
    pred = torch.randn(2, 14, 4, 4, 4)
    with unchanged(label, pred):
        res = check_segmentation(label, pred, to_onehot_y=True, softmax=True)
    assert res.passed is True and res.values["label_layout"] == "index [B,1,...]"
    res = check_segmentation(label, pred, to_onehot_y=False)
    assert res.passed is False and "to_onehot_y=True" in res.fix


def test_segmentation_onehot_settings_vs_real_class_count() -> None:
    label = torch.randint(0, 14, (2, 1, 4, 4, 4))
    label[0, 0, 0, 0, 0] = 13
    pred = torch.randn(2, 14, 4, 4, 4)
    res = check_segmentation(label, pred, to_onehot=13)
    assert res.passed is False
    assert "to_onehot=13 but the prediction has 14 channels" in res.finding
    assert res.values["real_class_count"] == 14
    res = check_segmentation(torch.full((2, 1, 4, 4, 4), 255), pred, to_onehot_y=True)
    assert not res.passed and "255" in res.finding


def test_segmentation_onehot_label_and_spatial_mismatch() -> None:
    pred = torch.randn(2, 3, 8, 8)
    onehot = torch.nn.functional.one_hot(torch.randint(0, 3, (2, 8, 8)), 3).permute(0, 3, 1, 2)
    assert check_segmentation(onehot, pred).passed
    res = check_segmentation(onehot, pred, to_onehot_y=True)
    assert not res.passed and "already one-hot" in res.finding
    res = check_segmentation(torch.zeros(2, 1, 4, 4, dtype=torch.long), pred)
    assert not res.passed and "spatial size differs" in res.finding
    res = check_segmentation(torch.zeros(2, 1, 8, 8), torch.randn(2, 1, 8, 8), softmax=True)
    assert not res.passed and "single-channel" in res.finding


def test_probabilities() -> None:
    p = torch.tensor([[0.2, 0.8], [0.0, 0.0], [float("nan"), 1.0], [-0.5, 1.0]])
    with unchanged(p):
        res = check_probabilities(p)
    assert res.passed is False
    assert res.values["nan"] == 1 and res.values["negative"] == 1 and res.values["rows_summing_to_zero"] == 1
    assert [2, 0] in res.positions and [3, 0] in res.positions
    assert check_probabilities(torch.softmax(torch.randn(4, 5), 1)).passed
    res = check_probabilities(torch.tensor([0.5, 1.5]), kind="bernoulli")
    assert not res.passed and res.values["above_one"] == 1


def test_bce_inputs_logits_and_targets() -> None:
    res = check_bce_inputs(torch.tensor([-2.0, 0.5, 3.0]))
    assert res.passed is False and "BCEWithLogitsLoss" in res.fix
    res = check_bce_inputs(torch.tensor([0.1, 0.9]), torch.tensor([0.0, 255.0]))
    assert res.passed is False and res.finding.startswith("target:")
    assert check_bce_inputs(torch.sigmoid(torch.randn(5)), torch.ones(5)).passed


def test_devices() -> None:
    model = torch.nn.Linear(3, 2)
    assert check_devices(model, torch.randn(1, 3)).passed
    res = check_devices(model.to("meta"), torch.randn(1, 3), target=torch.zeros(1))
    assert res.passed is False
    assert set(res.values) == {"meta", "cpu"} and res.values["cpu"]["count"] == 2


def test_target_dtype() -> None:
    assert check_target_dtype(torch.tensor([1, 2])).passed
    res = check_target_dtype(torch.tensor([1, 2], dtype=torch.uint8))
    assert not res.passed and "target.long()" in res.fix
    res = check_target_dtype(torch.tensor([1, 0]), loss="bce", input=torch.rand(2))
    assert not res.passed and "float32" in res.finding
    with pytest.raises(ValueError):
        check_target_dtype(torch.tensor([1]), loss="nonsense")


def test_finite_and_shapes() -> None:
    res = check_finite(loss=torch.tensor(float("nan")), logits=torch.randn(3))
    assert not res.passed and res.values["loss"] == {"nan": 1, "inf": 0}
    x = torch.randn(3, 12)
    res = check_shapes(x=x, w=torch.randn(10, 5), error_shapes=[[3, 12], [10, 5]])
    assert res.passed is False and res.values["in_error"] == {"x": [3, 12], "w": [10, 5]}


def test_build_on_this_machine() -> None:
    res = check_build()
    if torch.version.cuda is None:
        assert res.passed is False and "CPU-only build" in res.finding
    else:
        assert res.values["cuda"] == torch.version.cuda


def test_arch_compatibility_rules() -> None:
    archs = ["sm_50", "sm_60", "sm_70", "sm_80", "sm_86", "sm_90", "compute_90"]
    assert _arch_ok((8, 6), archs) and _arch_ok((8, 9), archs)  # sm_86 SASS runs on 8.9
    assert _arch_ok((12, 0), archs)  # PTX for compute_90 JITs on newer
    assert not _arch_ok((12, 0), ["sm_50", "sm_86", "sm_90"])
    assert not _arch_ok((3, 7), archs)


def test_oom_context_skips_without_gpu() -> None:
    res = check_oom_context()
    if not torch.cuda.is_available():
        assert res.passed is None


def test_result_prints_and_is_truthy() -> None:
    ok = CheckResult(name="x", passed=True, finding="fine")
    bad = CheckResult(name="x", passed=False, finding="bad", fix="do y")
    assert bool(ok) and not bool(bad)
    assert str(bad) == "FAIL x: bad\n     fix: do y"


def test_diagnosis_verify_runs_the_rules_checks() -> None:
    log = (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
        "thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    diag = diagnose_text(log)
    assert diag.root.rule == "nll_target_out_of_range"
    logits, target = torch.randn(4, 14), torch.tensor([0, 13, 255, 2])
    diag.verify(logits=logits, target=target)
    (result,) = diag.root.verification
    assert result["name"] == "class_targets" and result["passed"] is False and result["offending"] == [255]
    text = diag.render("text")
    assert "FAIL class_targets: 1 of 4 targets outside [0, 14)" in text
    assert "class_targets" in diag.render("markdown") and "class_targets" in diag.render("html")


def test_run_checks_says_what_is_missing() -> None:
    (res,) = run_checks(["class_targets"], {}, {"target": torch.tensor([1])})
    assert res.passed is None and "logits" in res.finding
    (res,) = run_checks(["no_such_check"], {}, {})
    assert res.passed is None


def test_check_result_is_importable_without_torch() -> None:
    """The verifier's result type is plain data: a data-pipeline test can use it where torch is absent."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from kbdebug.verify.result import CheckResult\n"
        "print(CheckResult(name='x', passed=True, finding='ok').passed)\n"
        "try:\n    from kbdebug.verify import check_index\nexcept ImportError as e:\n    print('needs torch' in str(e))"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_divisible_names_the_halvings_and_the_padded_size() -> None:
    x = torch.zeros(2, 3, 75, 600)
    with unchanged(x):
        res = check_divisible(x, factor=32)
    assert res.passed is False and res.values["padded"] == [96, 608] and res.values["largest_power_of_two"] == [1, 8]
    assert "halve exactly only 0 times" in res.finding
    assert res.fix == "pad to [96, 608]: h, w = x.shape[-2:]; x = F.pad(x, (0, (-w) % 32, 0, (-h) % 32))"
    assert check_divisible(torch.zeros(1, 3, 256, 512)).passed is True
    assert check_divisible(torch.zeros(1, 1, 48, 48, 48), factor=16).values["spatial"] == [48, 48, 48]


def test_a_concat_diagnosis_runs_the_divisibility_check_on_the_input() -> None:
    log = (
        'Traceback (most recent call last):\n  File "unet.py", line 33, in forward\n    x = torch.cat([x2, x1], dim=1)\n'
        "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 75 but got size 74 for tensor number 1 in the list.\n"
    )
    diag = diagnose_text(log)
    assert diag.root is not None and "input_divisible" in diag.root.checks
    diag.verify(x=torch.zeros(1, 3, 150, 150))
    results = {r["name"]: r for r in diag.root.verification}
    assert results["input_divisible"]["passed"] is False and results["input_divisible"]["values"]["padded"] == [160, 160]
