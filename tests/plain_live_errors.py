"""Plain Python errors of ML scripts, raised live, each with what a good explanation names: the failing object, the
key/index/attribute/name that failed, and its value (the dict's keys, the list's length, the call that returned
None). Used by tests/test_plain_live.py (kbdebug's own page) and benchmarks/plain_errors_vs_friendly.py."""

from __future__ import annotations

import glob
import math
from collections.abc import Callable
from typing import Any, NamedTuple

Wording = str | tuple[str, ...] | None


def length(n: int) -> tuple[str, ...]:
    """The ways an explanation says a sequence's length."""
    if n == 0:
        return ("0 items", "no item", "empty")
    return (f"{n} item", f"length `{n}`", f"length {n}", f"size {n}")


class Case(NamedTuple):
    name: str
    fn: Callable[[], Any]
    # (object, key/index/attribute/name, value): the texts that name each (any of them, whatever the case), or None
    names: tuple[Wording, Wording, Wording]


def config_key() -> Any:
    cfg = {"training": {"batch_size": 8, "lr": 0.1, "epochs": 3}}
    return cfg["training"]["n_workers"]


def sample_key() -> Any:
    sample = {"img": [0.1], "mask": [1]}
    return sample["image"]


def checkpoint_key() -> Any:
    ckpt = {"state_dict": {}, "epoch": 3, "optimizer": {}}
    return ckpt["model"]


def class_index_key() -> Any:
    idx_to_class = {0: "cat", 1: "dog"}
    pred = 2
    return idx_to_class[pred]


def label_name_key() -> Any:
    label2id = {"cat": 0, "dog": 1}
    label = "bird"
    return label2id[label]


def loader_key() -> Any:
    loaders = {"train": [1, 2], "val": [3]}
    return loaders["test"]


def argv_index() -> Any:
    argv = ["train.py"]
    return argv[1]


def glob_index() -> Any:
    checkpoints = sorted(glob.glob("/nonexistent-kbdebug-dir/*.pth"))
    return checkpoints[0]


class ShortDataset:
    def __init__(self) -> None:
        self.labels = [0, 1, 1]

    def __len__(self) -> int:
        return len(self.labels) + 1  # one too many

    def __getitem__(self, idx: int) -> Any:
        return self.labels[idx]


def dataset_len_index() -> Any:
    ds = ShortDataset()
    return [ds[i] for i in range(len(ds))]


def batch_tuple_index() -> Any:
    batch = ([0.5], [1])
    meta = batch[2]
    return meta


def empty_predictions_index() -> Any:
    preds: list[float] = []
    return preds[-1]


def layers_index() -> Any:
    layers = ["conv1", "conv2"]
    return layers[2]


def load_image(path: str) -> Any:
    return None  # like cv2.imread for a missing file: no exception, None


def none_attribute() -> Any:
    path = "/data/missing.png"
    img = load_image(path)
    return img.shape


def read_mask(path: str) -> Any:
    return None


def none_subscript() -> Any:
    mask = read_mask("/data/missing_mask.png")
    return mask[0]


class Wrapper:
    def __init__(self, module: Any) -> None:
        self.module = module


def wrapper_attribute() -> Any:
    model = Wrapper(object())
    return model.backbone


def module_attribute() -> Any:
    return math.tau2


def misspelt_name() -> Any:
    val_los = 0.3  # noqa: F841
    return val_loss  # type: ignore[name-defined] # noqa: F821


def unassigned_local() -> Any:
    scores = [0.1, 0.2]
    for s in scores:
        if s > 1:
            best_epoch = s
    return best_epoch


def unpack_values() -> Any:
    batch = ([0.5], [1], {"id": 3})
    images, targets = batch
    return images, targets


def none_compared() -> Any:
    best = None
    for val_loss in (0.4, 0.3):
        if val_loss < best:  # type: ignore[operator]
            best = val_loss
    return best


def none_summed() -> Any:
    running = None
    for loss in (0.5, 0.25):
        running += loss  # type: ignore[operator]
    return running


def loop_unpack() -> Any:
    loader = [([0.5], [1], "img_001.png")]
    for images, labels in loader:  # type: ignore[misc]
        return images, labels


def unexpected_keyword() -> Any:
    class UNet:
        def __init__(self, in_channels: int, num_classes: int) -> None:
            pass

    return UNet(in_channels=3, num_classes=4, dropout=0.1)  # type: ignore[call-arg]


def str_to_float() -> Any:
    row = ["img_001.png", "cat"]
    return float(row[1])


def data_parallel_attribute() -> Any:
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = torch.nn.Linear(2, 2)

    model = torch.nn.DataParallel(Net())
    return model.backbone(torch.zeros(1, 2))


def none_from_get() -> Any:
    cfg = {"optimizer": "adam"}
    return cfg.get("scheduler").step()  # type: ignore[attr-defined]


def list_remove_value() -> Any:
    classes = ["cat", "dog"]
    return classes.index("bird")


def nested_key() -> Any:
    meta = {"images": [{"id": 1, "file": "a.png"}]}
    return meta["images"][0]["file_name"]


def tuple_index_in_loop() -> Any:
    shapes = [(3, 224), (3, 224)]
    return [s[2] for s in shapes]


def worker_key() -> Any:
    """A DataLoader worker's error as the main process re-raises it (torch's ExceptionWrapper, what DataLoader uses)."""
    from torch._utils import ExceptionWrapper

    try:
        sample = {"img": [0.1], "mask": [1]}
        sample["image"]
    except KeyError:
        wrapped = ExceptionWrapper(where="in DataLoader worker process 0")
    wrapped.reraise()


def string_index() -> Any:
    name = ""
    return name[0]


def names_all(text: str, names: tuple[Wording, ...]) -> list[bool]:
    """For each part a case names (None: none to name), whether `text` holds one of its wordings, whatever the case."""
    low = text.lower()
    return [w is None or any(t.lower() in low for t in ((w,) if isinstance(w, str) else w)) for w in names]


CASES = [
    Case("config_key", config_key, ('cfg["training"]', "n_workers", "batch_size")),
    Case("sample_key", sample_key, ("sample", "image", "mask")),
    Case("checkpoint_key", checkpoint_key, ("ckpt", "model", "state_dict")),
    Case("class_index_key", class_index_key, ("idx_to_class", "2", "0, 1")),
    Case("label_name_key", label_name_key, ("label2id", "bird", "'dog'")),
    Case("loader_key", loader_key, ("loaders", "test", "'val'")),
    Case("nested_key", nested_key, ('meta["images"][0]', "file_name", "'file'")),
    Case("argv_index", argv_index, ("argv", "[1]", length(1))),
    Case("glob_index", glob_index, ("checkpoints", "[0]", length(0))),
    Case("dataset_len_index", dataset_len_index, ("self.labels", "idx", length(3))),
    Case("batch_tuple_index", batch_tuple_index, ("batch", "[2]", length(2))),
    Case("empty_predictions_index", empty_predictions_index, ("preds", "[-1]", length(0))),
    Case("layers_index", layers_index, ("layers", "[2]", length(2))),
    Case("tuple_index_in_loop", tuple_index_in_loop, ("s", "[2]", length(2))),
    Case("string_index", string_index, ("name", "[0]", length(0))),
    Case("none_attribute", none_attribute, ("img", "shape", "load_image(path)")),
    Case("none_subscript", none_subscript, ("mask", "subscriptable", "read_mask(")),
    Case("none_from_get", none_from_get, ('cfg.get("scheduler")', "step", "None")),
    Case("wrapper_attribute", wrapper_attribute, ("model", "backbone", "Wrapper")),
    Case("module_attribute", module_attribute, ("math", "tau2", "module")),
    Case("misspelt_name", misspelt_name, ("val_loss", "val_loss", "val_los`")),
    Case("unassigned_local", unassigned_local, ("best_epoch", "best_epoch", None)),
    Case("unpack_values", unpack_values, ("batch", "expected 2", length(3))),
    Case("none_compared", none_compared, ("best", "<", "is None")),
    Case("none_summed", none_summed, ("running", "+=", "is None")),
    Case("loop_unpack", loop_unpack, ("each item of `loader`", "expected 2", "`images, labels`")),
    Case("unexpected_keyword", unexpected_keyword, ("UNet", "dropout", None)),
    Case("str_to_float", str_to_float, ("row[1]", "cat", None)),
    Case("list_index_value", list_remove_value, ("classes", "bird", "'dog'")),
]
try:
    import torch  # noqa: F401
except ImportError:  # the re-raised worker error needs torch's wrapper
    pass
else:
    CASES.append(Case("worker_key", worker_key, ("sample", "'image'", ("re-raised", "worker process 0"))))
    CASES.append(Case("data_parallel_attribute", data_parallel_attribute, ("model", "backbone", "`model.module.backbone`")))
