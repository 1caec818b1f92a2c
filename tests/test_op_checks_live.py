"""Everyday ops' own checks, raised live by CPU torch and read from their printed tracebacks: an integer tensor given
to an op that computes in floating point (mean, std, norms, linalg, requires_grad) is `dtype_mismatch`; a batched
matmul or a matrix-vector product whose sizes differ is `matmul_shape_mismatch`; an in-place op whose result
broadcasts larger than the tensor it writes into is `broadcast_shape_mismatch`. numpy's broadcasting errors name
two shapes too, and no prediction/label pair: they stay `other`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from live_errors import guide, read, root  # noqa: E402

from kbdebug import diagnose_text  # noqa: E402


def _read(fn: Callable[[], object]) -> tuple[str, str, str]:
    """The root rule read live, the one read from the printed traceback, and the printed one's guide."""
    printed_root = read(fn)
    return root(fn).rule, printed_root.rule, " ".join(guide(printed_root).split())


@pytest.mark.parametrize(
    "fn",
    [
        lambda: torch.tensor([1, 2, 3]).mean(),
        lambda: torch.tensor([1, 2, 3]).std(),
        lambda: torch.tensor([3, 4]).norm(),
        lambda: torch.linalg.inv(torch.eye(2, dtype=torch.long)),
        lambda: torch.quantile(torch.tensor([1, 2, 3]), 0.5),
    ],
    ids=["mean", "std", "norm", "linalg_inv", "quantile"],
)
def test_an_integer_tensor_given_to_a_floating_point_op(fn: Callable[[], object]) -> None:
    live, printed_rule, text = _read(fn)
    assert (live, printed_rule) == ("dtype_mismatch", "dtype_mismatch")
    assert root(fn).title == "an integer tensor where the op needs floating point"
    assert "computes in floating point" in text and "is int64" in text
    assert "x.float()" in text and "dtype=torch.float32" in text
    assert "next(model.parameters())" not in text  # no module's parameters take part in it


def test_requires_grad_on_integer_values_is_made_float_where_it_is_made() -> None:
    live, printed_rule, text = _read(lambda: torch.tensor([1, 2, 3], requires_grad=True))
    assert (live, printed_rule) == ("dtype_mismatch", "dtype_mismatch")
    assert "Only a floating-point (or complex) tensor can require gradients" in text
    assert "torch.tensor(values, dtype=torch.float32, requires_grad=True)" in text


def test_batched_matmul_of_an_untransposed_operand() -> None:
    q, k = torch.randn(8, 10, 16), torch.randn(8, 10, 16)
    live, printed_rule, text = _read(lambda: q @ k)
    assert (live, printed_rule) == ("matmul_shape_mismatch", "matmul_shape_mismatch")
    assert "to start with `[8, 16]`" in text and "got `[8, 10]`" in text
    assert "(10 against 16)" in text
    assert "k.transpose(-2, -1)" in text and "so that its dim -2 is 16" in text


def test_bmm_of_two_batch_sizes_is_not_told_to_transpose() -> None:
    a, b = torch.randn(4, 3, 5), torch.randn(3, 5, 2)
    live, printed_rule, text = _read(lambda: torch.bmm(a, b))
    assert (live, printed_rule) == ("matmul_shape_mismatch", "matmul_shape_mismatch")
    assert "hold different numbers of matrices (4 against 3)" in text
    assert "transpose(-2, -1)" not in text


def test_a_vector_of_another_length_than_the_matrix_has_columns() -> None:
    m, v = torch.randn(100, 13), torch.randn(12)
    live, printed_rule, text = _read(lambda: torch.mv(m, v))
    assert (live, printed_rule) == ("matmul_shape_mismatch", "matmul_shape_mismatch")
    assert "a 100x13 matrix and a vector of 12" in text
    assert "Give the vector 13 entries" in text
    assert "in_features" not in text  # no Linear took part


def test_an_in_place_sum_of_a_per_sample_loss() -> None:
    total, loss = torch.zeros(1), torch.rand(32)

    def accumulate() -> None:
        total.add_(loss)

    live, printed_rule, text = _read(accumulate)
    assert (live, printed_rule) == ("broadcast_shape_mismatch", "broadcast_shape_mismatch")
    assert "made a result of shape `[32]`, larger than that tensor's `[1]`" in text
    assert "x = x + y" in text and "loss.sum()" in text


def test_a_grayscale_image_through_normalize_with_rgb_statistics() -> None:
    def normalize(tensor: torch.Tensor, mean: Any, std: Any) -> torch.Tensor:  # torchvision v1's, as written there
        mean = torch.as_tensor(mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub_(mean).div_(std)

    gray = torch.rand(1, 28, 28)

    def transform() -> torch.Tensor:
        mean = [0.485, 0.456, 0.406]
        return normalize(gray, mean, [0.229, 0.224, 0.225])

    live, printed_rule, text = _read(transform)
    assert (live, printed_rule) == ("broadcast_shape_mismatch", "broadcast_shape_mismatch")
    assert "got an image of 1 channel and a mean and std of 3 values" in text
    assert 'Image.open(path).convert("RGB")' in text and "Normalize(mean=[0.5], std=[0.5])" in text


def test_numpy_broadcasting_names_no_label_pair() -> None:
    np = pytest.importorskip("numpy")
    label = np.zeros(10)
    confusion = np.zeros((1, 10))

    def update() -> None:
        nonlocal confusion
        confusion += np.outer(label, label)

    live, printed_rule, _ = _read(update)
    assert (live, printed_rule) == ("other", "other")  # not batch_size_mismatch: (1, 10) against (10, 10) is no batch
    assert _read(lambda: np.zeros((3, 4)) + np.zeros(5))[:2] == ("other", "other")


def test_an_rnn_hidden_state_made_on_another_device() -> None:
    rnn, x = torch.nn.GRU(4, 8), torch.randn(3, 2, 4)
    h0 = torch.zeros(1, 2, 8, device="meta")  # a device that runs nowhere stands in for the CPU beside a GPU
    live, printed_rule, text = _read(lambda: rnn(x, h0))
    assert (live, printed_rule) == ("device_mismatch", "device_mismatch")
    assert "An RNN got its input on cpu and the initial hidden state it was given on meta" in text
    assert "h0 = torch.zeros(num_layers, x.size(1), hidden_size, device=x.device)" in text


def test_an_rnn_whose_weights_were_moved_elsewhere() -> None:
    rnn = torch.nn.LSTM(4, 8).to("meta")
    live, printed_rule, text = _read(lambda: rnn(torch.randn(3, 2, 4)))
    assert (live, printed_rule) == ("device_mismatch", "device_mismatch")
    assert "model.to(device)" in text and "initial hidden state" not in text


@pytest.mark.parametrize(
    "fn",
    [
        lambda: torch.zeros(5)[torch.tensor([0.0, 2.0])],
        lambda: torch.zeros(5).index_select(0, torch.tensor([1.0])),
        lambda: torch.zeros(5).index_copy_(0, torch.tensor([1.0]), torch.ones(1)),
        lambda: torch.zeros(5).take(torch.tensor([1.0])),
    ],
    ids=["advanced_indexing", "index_select", "index_copy", "take"],
)
def test_an_index_tensor_of_floats(fn: Callable[[], object]) -> None:
    live, printed_rule, text = _read(fn)
    assert (live, printed_rule) == ("dtype_mismatch", "dtype_mismatch")
    assert "An index tensor that is not of integers was used to pick elements" in text
    assert "idx = idx.long()" in text


@pytest.mark.parametrize(("fn", "op"), [(lambda: torch.cat([]), "cat"), (lambda: torch.stack([]), "stack")], ids=["cat", "stack"])
def test_joining_an_empty_list_is_explained_as_a_loop_that_ran_zero_times(fn: Callable[[], object], op: str) -> None:
    live, printed_rule, text = _read(fn)
    assert (live, printed_rule) == ("other", "other")  # no cause of its own: the page still follows the op
    assert f"The list given to `torch.{op}` was empty" in text
    assert "an empty DataLoader" in text and "if preds: all_preds = torch.cat(preds)" in text


def test_a_trainer_batch_without_labels_names_the_keys_it_had() -> None:
    """transformers' Trainer (not installed here): its message as the shipped example holds it."""
    text = "ValueError: The model did not return a loss from the inputs, only the following keys: logits. For reference, the inputs it received are input_ids,attention_mask.\n"
    inc = diagnose_text(text).root
    assert inc is not None and inc.rule == "other"
    page = " ".join(guide(inc).split())
    assert "it returned only `logits`, since the batch it got held `input_ids,attention_mask` and no `labels`" in page
    assert 'dataset.rename_column("target", "labels")' in page


def test_a_mask_value_too_large_for_float16() -> None:
    scores, mask = torch.randn(2, 4).half(), torch.zeros(2, 4, dtype=torch.bool)
    live, printed_rule, text = _read(lambda: scores.masked_fill(mask, -1e9))
    assert (live, printed_rule) == ("other", "other")
    assert "A number too large for float16 was written into a float16 tensor" in text
    assert "torch.finfo(scores.dtype).min" in text
    _, _, small = _read(lambda: torch.zeros(1, dtype=torch.int8).fill_(1000))
    assert "too large for int8 was written into an int8 tensor" in small
