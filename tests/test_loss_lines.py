"""A training log with no exception whose loss lines turned NaN or inf names nan_inf_detected, with where the loss
first turned (rule-ids.md, "Boundaries against a wrong specific cause"); a metric that is not a loss, a finite loss
beside the word `nan` and a loss scaler's overflow are no failure. The lines are the loggers' own formats."""

from __future__ import annotations

import pytest

from kbdebug import diagnose_text

TURNED = [
    # (log, loss_name, loss_value, epoch, step, lines)
    ("step 100 loss 0.6931\nstep 200 loss nan\nstep 300 loss nan\n", "loss", "nan", None, "200", 2),
    ("Epoch [2/10], Step [300/600], Loss: 0.51\nEpoch [2/10], Step [400/600], Loss: NaN\n", "Loss", "NaN", "2", "400", 1),
    (
        "{'loss': 0.4127, 'epoch': 0.5}\n{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.5e-05, 'epoch': 0.75}\n",
        "loss",
        "nan",
        "0.75",
        None,
        1,
    ),
    ("epoch 3 | iter 1200 | train_loss=inf | lr 3.0e-04\n", "train_loss", "inf", "3", "1200", 1),
    ("1875/1875 [====] - 4s 2ms/step - loss: nan - accuracy: 0.0987\n", "loss", "nan", None, None, 1),
    ("global_step=800 loss: tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)\n", "loss", "nan", None, "800", 1),
    ("Epoch 4: 12%|#2        | 57/469 [00:02<00:18, 21.7it/s, loss=nan, v_num=3]\n", "loss", "nan", "4", None, 1),
]


@pytest.mark.parametrize(("log", "name", "value", "epoch", "step", "lines"), TURNED)
def test_the_first_non_finite_loss_line_names_nan_inf_detected(
    log: str, name: str, value: str, epoch: str | None, step: str | None, lines: int
) -> None:
    inc = diagnose_text(log).incidents[0]
    assert inc.rule == "nan_inf_detected"
    assert (inc.facts["loss_name"], inc.facts["loss_value"]) == (name, value)
    assert (inc.facts.get("nonfinite_epoch"), inc.facts.get("nonfinite_step")) == (epoch, step)
    assert inc.facts["nonfinite_loss_lines"] == lines
    assert f"`{name}` printed" in inc.guide["what"]


NOT_A_FAILURE = [
    "step 100 loss: 0.5 (nan-safe) lr 1.0e-4\n",
    "val_auc nan (single-class batch) val_acc 0.93\n",  # a metric undefined on one batch: the run is fine
    "nan_loss_guard: on, skipped 0 batches with nan gradients\n",
    "[amp] Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0\n",
    "Found inf or nan in grad norm at iter 401, skipping update\n",
    "loss 0.31 | info: nan values are masked | inference done\n",
    "loss_nan_count=0 loss_inf_count=0\n",
]


@pytest.mark.parametrize("log", NOT_A_FAILURE)
def test_nan_in_other_words_is_no_failure(log: str) -> None:
    assert diagnose_text(log).incidents == []


def test_a_nan_loss_before_a_named_cause_folds_into_it() -> None:
    log = (
        "step 200 loss nan\n"
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:92: operator(): block: [0,0,0], thread: [0,0,0] "
        "Assertion `input_val >= zero && input_val <= one` failed.\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
    )
    incidents = diagnose_text(log).incidents
    assert [i.rule for i in incidents] == ["bce_input_out_of_range"]
    assert "nan_inf_detected" in [c.rule for c in incidents[0].consequences]
