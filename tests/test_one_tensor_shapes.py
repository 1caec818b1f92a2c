"""An op that checks one tensor's shape against the shape it needs prints two shapes that are both that tensor's:
`expand`'s target and tensor sizes, an RNN's expected and given hidden state, an attention mask's shape and the one
it should have. Read as a prediction and a label, those two shapes named a wrong specific cause (a one-hot channel
mismatch for an LSTM's hidden state, a batch-size mismatch for a 3D attention mask, a loss target for `expand`'s
"Target sizes"). Raised live by CPU torch and read from the printed traceback alike; and a dot product of two
vectors of different lengths gets a guide about a dot product, not about broadcasting."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from live_errors import guide, read, root  # noqa: E402

PAIR_RULES = {"channel_onehot_mismatch", "target_shape_mismatch", "batch_size_mismatch"}


def _lstm_hidden_of_another_batch() -> object:
    lstm = nn.LSTM(4, 4, batch_first=True)
    hidden = (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))  # made for a batch of 3
    return lstm(torch.randn(2, 5, 4), hidden)  # the last batch holds 2


def _gru_hidden_of_another_batch() -> object:
    return nn.GRU(4, 4)(torch.randn(5, 2, 4), torch.zeros(1, 3, 4))


def _expand_of_a_non_singleton_channel_dim() -> object:
    return torch.randn(2, 3, 8, 8).expand(2, 14, 8, 8)


def _expand_of_a_mask_to_another_length() -> object:
    mask = torch.ones(8, 1, 1, 64)
    return mask.expand(-1, 12, 77, 77)


def _attention_mask_3d_without_heads() -> object:
    attn = nn.MultiheadAttention(8, 2, batch_first=True)
    q = torch.randn(2, 4, 8)
    return attn(q, q, q, attn_mask=torch.zeros(2, 4, 4))  # (batch, tgt, src): needs batch * num_heads


def _attention_mask_2d_of_another_length() -> object:
    attn = nn.MultiheadAttention(8, 2, batch_first=True)
    q = torch.randn(2, 4, 8)
    return attn(q, q, q, attn_mask=torch.zeros(3, 3))


CASES = {
    "lstm hidden": (_lstm_hidden_of_another_batch, "other"),
    "gru hidden": (_gru_hidden_of_another_batch, "other"),
    "expand channel dim": (_expand_of_a_non_singleton_channel_dim, "broadcast_shape_mismatch"),
    "expand mask": (_expand_of_a_mask_to_another_length, "broadcast_shape_mismatch"),
    "3D attn_mask": (_attention_mask_3d_without_heads, "other"),
    "2D attn_mask": (_attention_mask_2d_of_another_length, "other"),
}


@pytest.mark.parametrize("name", CASES)
def test_one_tensors_two_shapes_name_no_prediction_label_cause(name: str) -> None:
    fn, want = CASES[name]
    live = root(fn)
    printed_root = read(fn)
    assert (live.rule, printed_root.rule) == (want, want)
    assert "shape_relation" not in live.facts and "shape_relation" not in printed_root.facts


def test_expand_is_explained_as_expand_with_the_users_sizes() -> None:
    inc = root(_expand_of_a_non_singleton_channel_dim)
    text = guide(inc)
    assert "`expand` was asked for size 14 at dimension 1, where the tensor has 3" in text
    assert "only a dimension of size 1 can be expanded" in text
    assert "elementwise" not in text


def test_a_dot_product_of_vectors_of_two_lengths_is_explained_as_a_dot_product() -> None:
    inc = root(lambda: torch.dot(torch.randn(3), torch.randn(4)))
    assert inc.rule == "broadcast_shape_mismatch"
    text = guide(inc)
    assert "hold 3 and 4" in text and "dot product" in text
    assert "dimension ?" not in text and "at dimension ," not in text  # the message names no dim


def test_a_prediction_label_pair_named_by_a_loss_is_still_read_as_one() -> None:
    # BCE's `Target size (...) must be the same as input size (...)`: a template whose shapes are the pair
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    inc = root(lambda: bce(torch.randn(2, 14, 8, 8), torch.rand(2, 1, 8, 8)))
    assert inc.rule == "channel_onehot_mismatch"


def test_an_rnn_hidden_state_of_another_batch_gets_a_page_that_says_so() -> None:
    """No rule of its own, but the sizes it names say which dim differs: the batch (the last, smaller batch of an
    epoch meeting a hidden state built once), with a fix built from the batch at hand."""
    inc = root(_lstm_hidden_of_another_batch)
    text = guide(inc)
    assert inc.rule == "other" and (inc.facts["hidden_expected"], inc.facts["hidden_given"]) == ([1, 2, 4], [1, 3, 4])
    assert "a hidden state for a batch of 3 where the input holds 2" in text
    assert "h0 = x.new_zeros(1, x.size(0), 4)" in text and "drop_last=True" in text
