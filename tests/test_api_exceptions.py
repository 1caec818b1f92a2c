"""diagnose(exc) on real torch errors raised on the CPU: the rule, the facts read from the
message, and the user's frame read from the traceback (not from text)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from kbdebug import KbdebugError, diagnose  # noqa: E402
from kbdebug.render.words import fix_text  # noqa: E402


def raised(fn: Callable[[], object]) -> tuple[BaseException, int]:
    """Call fn, return its exception and the line of fn's last statement (the failing call)."""
    src, start = inspect.getsourcelines(fn)
    line = start + len(src) - 1
    with pytest.raises(Exception) as info:
        fn()
    return info.value, line


def target_oob() -> None:
    logits, target = torch.randn(4, 10), torch.tensor([1, 2, 14, 3])
    F.cross_entropy(logits, target)


def spatial_target() -> None:
    logits, label = torch.randn(2, 14, 4, 4, 4), torch.zeros(2, 1, 4, 4, 4, dtype=torch.long)
    F.cross_entropy(logits, label)


def conv_channels() -> None:
    conv, x = nn.Conv2d(3, 8, 3), torch.randn(1, 4, 8, 8)
    conv(x)


def matmul() -> None:
    fc, x = nn.Linear(10, 5), torch.randn(3, 12)
    fc(x)


def broadcast() -> None:
    a, b = torch.randn(2, 3), torch.randn(2, 4)
    a + b


def batch_size() -> None:
    logits, target = torch.randn(4, 10), torch.tensor([1, 2, 3])
    F.cross_entropy(logits, target)


def bce_range() -> None:
    logits, target = torch.randn(8) * 3, torch.ones(8)
    F.binary_cross_entropy(logits, target)


def one_hot() -> None:
    labels = torch.tensor([0, 3, 5])
    F.one_hot(labels, num_classes=4)


def multinomial() -> None:
    probs = torch.tensor([0.5, -0.1, 0.6])
    torch.multinomial(probs, 1)


def embedding() -> None:
    emb, ids = nn.Embedding(100, 8), torch.tensor([[1, 2, 100]])
    emb(ids)


def gather() -> None:
    src, idx = torch.randn(3, 4), torch.tensor([[0, 4], [1, 1], [2, 2]])
    torch.gather(src, 1, idx)


def device_mismatch() -> None:
    fc, x = nn.Linear(3, 4).to("meta"), torch.randn(2, 3)
    fc(x)


CASES = [
    (target_oob, "nll_target_out_of_range", {"target": 14}),
    (spatial_target, "target_shape_mismatch", {"shapes": [[2, 4, 4, 4], [2, 1, 4, 4, 4]], "extra_singleton_dim": 1}),
    (conv_channels, "conv_channel_mismatch", {"expected_channels": 3, "got_channels": 4}),
    (matmul, "matmul_shape_mismatch", {"shapes": [[3, 12], [10, 5]]}),
    (broadcast, "broadcast_shape_mismatch", {"size_a": 3, "size_b": 4, "dim": 1}),
    (batch_size, "batch_size_mismatch", {"input_batch": 4, "target_batch": 3}),
    (bce_range, "bce_input_out_of_range", {"which": "input"}),
    (one_hot, "channel_onehot_mismatch", {}),
    (multinomial, "invalid_probability", {}),
    (embedding, "embedding_index_oob", {}),
    (gather, "scatter_gather_index_oob", {"index": 4, "dim": 1, "size": 4, "op": "gather"}),
    (device_mismatch, "device_mismatch", {"device_a": "meta", "device_b": "cpu"}),
]


@pytest.mark.parametrize(("fn", "rule", "facts"), CASES, ids=[c[0].__name__ for c in CASES])
def test_diagnose_live_exception(fn: Callable[[], None], rule: str, facts: dict) -> None:
    exc, line = raised(fn)
    diag = diagnose(exc)
    root = diag.root
    assert root is not None, diag
    assert root.rule == rule
    for key, val in facts.items():
        assert root.facts.get(key) == val, (key, root.facts)
    assert root.facts["innermost_user_frame"] == f"{__file__}:{line}"
    assert root.facts["user_function"] == fn.__name__
    assert root.facts["error_type"] == type(exc).__name__
    assert root.facts["error_message"] == str(exc).splitlines()[0].strip()
    assert root.guide["what"] and "{{" not in fix_text(root)


def test_frame_tensors_describe_the_failing_line() -> None:
    exc, _ = raised(target_oob)
    tensors = diagnose(exc).root.facts["frame_tensors"]
    assert tensors["target"] == {"shape": [4], "dtype": "int64", "device": "cpu", "min": 1, "max": 14}
    assert tensors["logits"]["shape"] == [4, 10]


def test_user_frame_of_the_cause_in_a_chain() -> None:
    def load() -> None:
        try:
            gather()
        except RuntimeError as err:
            raise ValueError("batch 3 failed") from err

    with pytest.raises(ValueError) as info:
        load()
    root = diagnose(info.value).root
    assert root.rule == "scatter_gather_index_oob"
    assert root.facts["error_type"] == "RuntimeError"
    assert root.facts["user_function"] == "gather"


def test_log_argument_supplies_kernel_lines() -> None:
    line = inspect.currentframe().f_lineno + 2
    try:
        raise RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported")
    except RuntimeError as err:
        exc = err
    alone = diagnose(exc)
    assert alone.root.rule == "async_error_unlocalized"
    log = (
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [0,0,0], thread: [3,0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.\n"
    )
    with_log = diagnose(exc, log=log)
    assert with_log.root.rule == "embedding_index_oob"
    assert with_log.root.facts["kernel_line"] == 1236
    assert with_log.root.facts["innermost_user_frame"].endswith(f"test_api_exceptions.py:{line}")


def test_guard_error_is_read_directly() -> None:
    try:
        raise KbdebugError("gather: index 7 >= size 4", rule="scatter_gather_index_oob", facts={"index": 7, "size": 4})
    except KbdebugError as err:
        root = diagnose(err).root
    assert root.rule == "scatter_gather_index_oob"
    assert root.facts["index"] == 7
    assert root.title == "gather/scatter index out of bounds"


def test_diagnosis_renders_in_every_format() -> None:
    exc, _ = raised(embedding)
    diag = diagnose(exc)
    assert "embedding_index_oob" in diag.render("text")
    assert "<html" in diag.render("html").lower()
    assert '"rule": "embedding_index_oob"' in diag.render("json")
