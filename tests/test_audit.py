"""audit(model) and describe(x): per-stage records, the failing module named, NaN found."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from kbdebug import audit, describe, print_describe  # noqa: E402


class Net(nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def test_records_every_stage_in_order() -> None:
    model = Net()
    x = torch.randn(2, 3, 8, 8)
    with audit(model) as a:
        model(x)
    names = [r.module for r in a.records]
    assert names == ["Net", "features", "features.0", "features.1", "features.2", "features.3", "head"]
    conv = a.records[2]
    assert conv.inputs[0].shape == [2, 3, 8, 8] and conv.outputs[0].shape == [2, 8, 8, 8]
    assert conv.inputs[0].dtype == "float32" and conv.inputs[0].device == "cpu"
    assert conv.inputs[0].min == pytest.approx(float(x.min())) and conv.inputs[0].max == pytest.approx(float(x.max()))
    relu = a.records[3]
    assert relu.outputs[0].min >= 0
    assert a.failed is None and all(r.finished for r in a.records)
    assert not model._forward_hooks and not model.head._forward_pre_hooks  # hooks removed on exit


def test_names_the_failing_module_and_notes_the_exception() -> None:
    model = Net()
    model.head = nn.Linear(7, 5)  # wrong in_features
    with pytest.raises(RuntimeError) as info, audit(model) as a:
        model(torch.randn(2, 3, 8, 8))
    assert a.failed is not None and a.failed.module == "head" and a.failed.type == "Linear"
    assert a.failed.inputs[0].shape == [2, 8]
    assert "mat1 and mat2" in a.failed.error
    assert any("kbdebug.audit: failed in module 'head' (Linear)" in n for n in info.value.__notes__)
    assert "first failing module: head (Linear)" in a.report()


def test_first_nonfinite_stage() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Identity())
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    with audit(model) as a:
        model(torch.ones(1, 3))
    assert a.first_nonfinite is not None and a.first_nonfinite.module == "0"
    inner = [r for r in a.records if r.module == "0"][0]
    assert inner.outputs[0].nan == 1
    assert "NaN/inf" in a.report()


def test_shapes_only_and_leaves_only() -> None:
    model = Net()
    with audit(model, values=False, leaves_only=True) as a:
        model(torch.randn(1, 3, 4, 4))
    assert [r.module for r in a.records] == ["features.0", "features.1", "features.2", "features.3", "head"]
    assert a.records[0].inputs[0].min is None


def test_sync_mode_runs_on_cpu() -> None:
    model = Net()
    with audit(model, sync=True) as a:
        model(torch.randn(1, 3, 4, 4))
    assert a.failed is None and len(a.records) == 7


def test_describe_returns_without_printing(capsys: pytest.CaptureFixture[str]) -> None:
    text = describe(torch.tensor([[1.0, float("nan")], [3.0, -1.0]]), "logits")
    assert text == "logits: [2, 2] float32 cpu min=-1 max=3 mean=1 nan=1 inf=0"
    assert capsys.readouterr().out == ""
    text = describe({"ids": torch.tensor([3, 7]), "mask": torch.tensor([True, False])}, "batch")
    assert text.splitlines() == ["batch['ids']: [2] int64 cpu min=3 max=7 mean=5", "batch['mask']: [2] bool cpu min=0 max=1 mean=0.5"]
    assert describe(3) == "value: int (no tensors)"
    logits = torch.zeros(2, 3)
    assert describe(logits) == "logits: [2, 3] float32 cpu min=0 max=0 mean=0"
    print(describe(logits))
    assert capsys.readouterr().out == "logits: [2, 3] float32 cpu min=0 max=0 mean=0\n"


def test_print_describe_prints_once() -> None:
    buf = io.StringIO()
    scores = torch.ones(2)
    text = print_describe(scores, file=buf)
    assert text == "scores: [2] float32 cpu min=1 max=1 mean=1"
    assert buf.getvalue() == text + "\n"


class LogThenLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log(x)  # a negative input makes NaN here, before fc
        return self.fc(x)


def test_nan_made_by_a_function_in_forward_is_blamed_there_not_on_the_next_module() -> None:
    """#37: fc's input was already NaN; the first place a non-finite value appears is the forward's code."""
    model = LogThenLinear()
    with audit(model) as a:
        model(torch.tensor([[1.0, -1.0, 2.0, 3.0]]))
    origin = a.nonfinite_origin
    assert origin is not None and origin.by is None
    assert origin.in_forward_of is not None and origin.in_forward_of.type == "LogThenLinear"
    assert origin.before is not None and origin.before.module == "fc"
    assert a.first_nonfinite is not None and a.first_nonfinite.type == "LogThenLinear"
    last = a.report().splitlines()[-1]
    assert last.startswith("first NaN/inf made in LogThenLinear.forward (test_audit.py:")
    assert last.endswith("before it called fc (Linear): fc's input already held NaN/inf (it only passed it on); look at the ops before it")


def test_nan_already_in_the_input_is_not_blamed_on_a_module() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with audit(model) as a:
        model(torch.tensor([[float("nan"), 1.0]]))
    assert a.nonfinite_origin is not None and a.nonfinite_origin.in_inputs
    assert a.first_nonfinite is None
    assert a.report().endswith("first NaN/inf already in the model's input: it came from the data or the code before the model")
