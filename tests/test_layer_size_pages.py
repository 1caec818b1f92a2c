"""A layer built for another feature count than its input has, a loss's class weights for another class count, and
a tensor of many elements used as one number or one truth value: no rule of their own (each is one tensor against
what the op needs, no prediction/label pair), so the catch-all's page says what happened, with the sizes the message
names, and what to change. Read live and from the printed traceback of the same error, which must agree."""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from live_errors import guide, read, root  # noqa: E402


def _norm_of_another_width() -> object:
    norm = nn.BatchNorm2d(16)
    feats = torch.randn(2, 8, 4, 4)
    return norm(feats)


def _layer_norm_of_two_dims() -> object:
    norm = nn.LayerNorm([4, 16])
    tokens = torch.randn(2, 3, 8)
    return norm(tokens)


def _lstm_of_more_features() -> object:
    rnn = nn.LSTM(10, 20, batch_first=True)
    seq = torch.randn(2, 5, 12)
    return rnn(seq)


def _item_of_a_batch_of_losses() -> object:
    losses = nn.functional.cross_entropy(torch.randn(3, 4), torch.tensor([0, 1, 2]), reduction="none")
    return losses.item()


def _float_of_a_matrix() -> object:
    return float(torch.zeros(2, 2))


def _tensor_of_a_list_of_tensors() -> object:
    feats = [torch.zeros(2), torch.zeros(2)]
    return torch.tensor(feats)


def _class_weights_for_three_of_five_classes() -> object:
    crit = nn.CrossEntropyLoss(weight=torch.ones(3))
    return crit(torch.randn(4, 5), torch.tensor([0, 1, 3, 2]))


def _shuffled_empty_dataset() -> object:
    dataset: list = []
    return torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True)


def _numpy_of_an_output() -> object:
    out = nn.Linear(3, 2)(torch.randn(4, 3))
    return out.numpy()


def _pool_over_a_small_map() -> object:
    pool = nn.MaxPool2d(4)
    return pool(torch.randn(1, 3, 2, 2))


def _sum_over_a_dim_past_the_rank() -> object:
    x = torch.randn(2, 3)
    return x.sum(dim=2)


def _optimizer_of_layers_in_a_list() -> object:
    class Net(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layers = [nn.Linear(3, 3)]  # a plain list: not registered

    return torch.optim.Adam(Net().parameters())


def _manual_update_outside_no_grad() -> object:
    w = torch.zeros(3, requires_grad=True)
    w -= 0.1 * torch.ones(3)
    return w


def _backward_of_per_sample_losses() -> object:
    losses = nn.functional.mse_loss(torch.randn(4, 2, requires_grad=True), torch.zeros(4, 2), reduction="none")
    return losses.backward()


def _if_on_a_comparison() -> object:
    pred = torch.tensor([1.0, 2.0])
    return 1 if pred > 1 else 0


CASES: dict[str, tuple[Callable[[], object], list[str]]] = {
    "batch norm": (
        _norm_of_another_width,
        ["A batch norm built for 16 features was given an input with 8 channels (its dim 1)", "`nn.BatchNorm2d(8)`", "`[B, 16, ...]`"],
    ),
    "layer norm": (
        _layer_norm_of_two_dims,
        [
            "A LayerNorm over the last dims `[4, 16]` was given an input of size `[2, 3, 8]`, whose last dims are `[3, 8]`",
            "`nn.LayerNorm([3, 8])`",
        ],
    ),
    "rnn input size": (
        _lstm_of_more_features,
        [
            "built with `input_size=10`, and its input's last dim (the features of each step) is 12",
            "`input_size=12`",
            "`nn.Linear(12, 10)`",
        ],
    ),
    "item": (_item_of_a_batch_of_losses, ["A tensor of 3 elements was turned into one Python number", "`loss.mean().item()`"]),
    "float": (_float_of_a_matrix, ["A tensor of more than one element was turned into one Python number"]),
    "tensor of tensors": (_tensor_of_a_list_of_tensors, ["was given tensors where it takes numbers", "`torch.stack(items)`"]),
    "class weights": (
        _class_weights_for_three_of_five_classes,
        ["class weights hold 3 values, and its scores have 5 classes", "`torch.bincount(labels, minlength=5)`", "give the head 3 outputs"],
    ),
    "empty dataset": (_shuffled_empty_dataset, ["a dataset of 0 samples", "`if len(dataset) == 0: raise FileNotFoundError("]),
    "numpy of a graph tensor": (_numpy_of_an_output, ["part of the autograd graph", "`x.detach().cpu().numpy()`"]),
    "pool window": (_pool_over_a_small_map, ["the input is 2 x 2 per channel, so the output would be 0 x 0", "`nn.AdaptiveAvgPool2d`"]),
    "dim out of range": (_sum_over_a_dim_past_the_rank, ["asked for dim 2 of a tensor of 2 dims (dims -2 to 1 exist)", "`dim=-1`"]),
    "optimizer of nothing": (_optimizer_of_layers_in_a_list, ["no parameters to optimize", "`nn.ModuleList([...])`"]),
    "leaf in place": (_manual_update_outside_no_grad, ["was changed in place", "`with torch.no_grad():`"]),
    "backward of many": (
        _backward_of_per_sample_losses,
        ["of more than one element", "`loss.mean().backward()`", "`out.backward(torch.ones_like(out))`"],
    ),
    "bool": (_if_on_a_comparison, ["used as one truth value", "`(x > 0).any()` or `.all()`", "`torch.equal(a, b)`"]),
}


@pytest.mark.parametrize("name", CASES)
def test_the_page_names_the_sizes_and_the_change(name: str) -> None:
    fn, says = CASES[name]
    inc = root(fn)
    text = " ".join(guide(inc).split())
    assert inc.rule == "other", text
    assert [s for s in says if s not in text] == [], text
    printed_root = read(fn)
    assert printed_root.rule == "other" and printed_root.facts["message_template"] == inc.facts["message_template"]
    assert [s for s in says if s not in " ".join(guide(printed_root).split())] == []


def test_a_dim_out_of_range_is_not_explained_as_a_sequence_index() -> None:
    text = " ".join(guide(root(_sum_over_a_dim_past_the_rank)).split())
    assert "list, tuple or string" not in text
