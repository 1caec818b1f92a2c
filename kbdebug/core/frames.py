"""Which frames of a traceback are the user's: the one place that knows library paths.

A leaf module (no kbdebug imports), so the parser, the facts, the live hooks and the verifier
all draw the user/library line in the same place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import FrameType, TracebackType

from kbdebug import _regex_cache

LIBRARY_PATH = _regex_cache.compile(
    r"site-packages|dist-packages|[\\/]lib[\\/]python\d|^<frozen|^<string>|[\\/]torch[\\/](?:nn|autograd|cuda|utils|_tensor|"
    r"functional|distributed|_dynamo|_inductor|optim|serialization|_utils|_ops|amp|__init__)|^/usr/lib/python"
    # a compiled module's source as Cython prints it (`pandas/_libs/parsers.pyx`), numpy's dispatch shim, and the code
    # torch.compile generates into its cache (`/tmp/torchinductor_root/xc/cxc...py`, `$TORCHINDUCTOR_CACHE_DIR`)
    r"|\.(?:pyx|pxd|pxi)$|^<__array_function__ internals>|[\\/]torchinductor_[^\\/]+[\\/]"
)


# The ecosystem's libraries by their import name: a file under `<root>/<name>/...` is that library's code
# wherever it is installed from (a source checkout, `pip install -e`, a zipapp's link tree), not only
# under site-packages. A user's own folder of that name among their scripts is not (`scripts/triton/run.py`).
# Only libraries that are imported: codebases users clone to work in (mmdetection, Megatron, fairseq,
# detectron2) are the user's project when they run them from their checkout.
LIBRARY_PACKAGES = (
    "monai|transformers|timm|torchvision|torchaudio|ignite|torchmetrics|segmentation_models_pytorch|lightning|"
    "pytorch_lightning|lightning_fabric|deepspeed|accelerate|triton|mmcv|mmengine|apex|peft|diffusers|xformers|"
    "bitsandbytes|flash_attn|numpy|scipy|sklearn|PIL|pandas|albumentations|kornia|cv2"
)
_PACKAGE_TREE = _regex_cache.compile(rf"(?:^|[\\/])(?:{LIBRARY_PACKAGES})[\\/](?:[\w.-]+[\\/])*[\w.-]+\.py$")
_USER_FOLDERS = _regex_cache.compile(r"(?:^|[\\/])(?:scripts?|examples?|tests?|tools|experiments?|notebooks?)[\\/]")


def is_library_path(path: str) -> bool:
    """True for the stdlib, installed packages, torch's own Python files and the ecosystem's libraries by
    their package layout, as printed in a traceback."""
    path = path.replace("\\\\", "\\")
    if LIBRARY_PATH.search(path):
        return True
    m = _PACKAGE_TREE.search(path)
    return m is not None and not _USER_FOLDERS.search(path[: m.start() + 1])


_IPYTHON_INPUT = _regex_cache.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_CELL = _regex_cache.compile(r"^Cell In\s*\[(\d+)\]$")


def location(file: str, line: int | None, cell: int | None = None) -> str:
    """`file:LINE`, as a user finds it: a notebook cell as IPython 8 names it, `Cell In[3], line 2`, not
    `<ipython-input-3-9f8e7d6c5b4a>:2` (`cell`: its number where IPython mapped a temporary file to it)."""
    m = _IPYTHON_INPUT.match(file) or _CELL.match(file)
    number = int(m.group(1)) if m else cell
    if number is not None:
        return f"Cell In[{number}], line {line}" if line is not None else f"Cell In[{number}]"
    return f"{file}:{line}" if line is not None else file


def basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1]


_PKG_DIR = str(Path(__file__).resolve().parent.parent)  # kbdebug/, this file being kbdebug/core/frames.py


def is_library_file(filename: str) -> bool:
    """A live frame's file that is not the user's: kbdebug itself, the stdlib, installed packages, torch."""
    if filename.startswith(_PKG_DIR) or is_library_path(filename):
        return True
    return any(filename.startswith(p) for p in _stdlib_prefixes())


@cache
def _stdlib_prefixes() -> tuple[str, ...]:
    import sysconfig

    paths = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(p for p in paths if p)


def user_frame(tb: TracebackType | None) -> FrameType | None:
    """The innermost frame of the traceback outside the stdlib, site-packages, torch and kbdebug."""
    found: FrameType | None = None
    while tb is not None:
        if not is_library_file(tb.tb_frame.f_code.co_filename):
            found = tb.tb_frame
        tb = tb.tb_next
    return found


def frame_needle(facts: Mapping[str, object]) -> str:
    """How the innermost user frame appears in a traceback: `"PATH", line N`, or a notebook's `Cell In[3], line 2`."""
    frame = facts.get("innermost_user_frame")
    if isinstance(frame, str) and frame.startswith("Cell In["):  # IPython 8 prints the cell as we name it
        return frame
    if not isinstance(frame, str) or ":" not in frame:
        return ""
    path, _, line = frame.rpartition(":")
    return f'"{path}", line {line}' if line.isdigit() else ""
