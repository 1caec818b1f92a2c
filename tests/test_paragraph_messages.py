"""An error whose text begins with a newline is printed from the line after its type, as a paragraph (transformers
writes its import errors so; torch 1.x's driver check did too). The guide quotes that paragraph's first sentence,
never an empty message; and a library's own words for an environment that cannot load its code (transformers'
backends, FlashAttention 2, Accelerate, an ImportError saying what it requires, NumPy 2 under a module built for 1.x,
another cuDNN on LD_LIBRARY_PATH) are `import_failure`, read live and from the printed traceback alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from live_errors import guide, read, root

from kbdebug import diagnose_text

# as transformers.utils.import_utils words it (SENTENCEPIECE_IMPORT_ERROR), formatted with the class that needs it
SENTENCEPIECE = """
LlamaTokenizer requires the SentencePiece library but it was not found in your environment. Check out the instructions on the
installation page of its repo: https://github.com/google/sentencepiece#installation and follow the ones
that match your environment. Please note that you may need to restart your runtime after installation.
"""
FLASH = (
    "FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package flash_attn seems to "
    "be not installed. Please refer to the documentation of https://huggingface.co/docs/transformers/perf_infer_gpu_one"
    "#flashattention-2 to install Flash Attention 2."
)


def _raise(exc: BaseException) -> Callable[[], object]:
    def fail() -> object:
        raise exc

    return fail


def _both(fn: Callable[[], object]) -> tuple[str, str, str, str]:
    """Rule and quoted message, live and from the printed traceback."""
    live, printed_root = root(fn), read(fn)
    return live.rule, printed_root.rule, str(live.facts["error_message"]), str(printed_root.facts["error_message"])


def test_a_backend_transformers_lacks_is_named_by_its_first_sentence() -> None:
    fn = _raise(ImportError(SENTENCEPIECE))
    sentence = "LlamaTokenizer requires the SentencePiece library but it was not found in your environment."
    assert _both(fn) == ("import_failure", "import_failure", sentence, sentence)
    text = " ".join(guide(root(fn)).split())
    assert f"says so in its own words: `{sentence}`" in text
    assert "`python -m pip install sentencepiece`" in text


def test_flash_attention_2_without_flash_attn_offers_sdpa() -> None:
    fn = _raise(ImportError(FLASH))
    live, printed_rule, _, _ = _both(fn)
    assert (live, printed_rule) == ("import_failure", "import_failure")
    text = " ".join(guide(root(fn)).split())
    assert '`attn_implementation="sdpa"`' in text and "flash-attn --no-build-isolation" in text


@pytest.mark.parametrize(
    ("message", "package"),
    [
        ("Using `low_cpu_mem_usage=True` or a `device_map` requires Accelerate: `pip install 'accelerate>=0.26.0'`", "accelerate"),
        ("TensorBoard logging requires TensorBoard version 1.15 or above", "tensorboard"),
    ],
    ids=["accelerate", "tensorboard"],
)
def test_an_import_error_that_says_what_it_requires_gives_its_pip_command(message: str, package: str) -> None:
    fn = _raise(ImportError(message))
    live, printed_rule, _, _ = _both(fn)
    assert (live, printed_rule) == ("import_failure", "import_failure")
    assert f"`python -m pip install {package}`" in " ".join(guide(root(fn)).split())


def test_a_driver_check_written_as_a_paragraph_quotes_its_sentence() -> None:
    fn = _raise(
        AssertionError("\nFound no NVIDIA driver on your system. Please check that you\nhave an NVIDIA GPU and installed a driver\n")
    )
    live, printed_rule, said_live, said_read = _both(fn)
    assert (live, printed_rule) == ("driver_error", "driver_error")
    assert said_live == said_read == "Found no NVIDIA driver on your system."


@pytest.mark.parametrize(
    ("message", "quoted"),
    [
        ("size mismatch for fc.weight", "size mismatch for fc.weight"),  # one line: as it is
        ("Error(s) in loading state_dict for Net:\n\tMissing key(s)", "Error(s) in loading state_dict for Net:"),  # the first line
        ("\n\nNo sentence end here\nbut two lines", "No sentence end here but two lines"),  # a paragraph without a full stop
    ],
)
def test_what_a_guide_quotes_of_a_message(message: str, quoted: str) -> None:
    assert root(_raise(RuntimeError(message))).facts["error_message"] == quoted


def test_a_bare_type_takes_no_message_from_the_lines_after_it() -> None:
    """`AssertionError` alone has no message: the training output after it is not one, nor the guide's quote."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "losses.py", line 31, in soft_dice_score\n'
        "    assert output.size() == target.size()\n"
        "AssertionError\n"
        "step 4100 lr 1.0e-04 grad_norm 0.812\n"
    )
    paragraph = text.replace("AssertionError\n", "AssertionError: \n")
    bare, para = diagnose_text(text).root, diagnose_text(paragraph).root
    assert bare is not None and para is not None
    assert bare.facts.get("error_message") == ""
    assert para.facts.get("error_message") == "step 4100 lr 1.0e-04 grad_norm 0.812"  # `Type:` then text: its message


def test_numpy_2_under_a_module_built_for_numpy_1() -> None:
    fn = _raise(AttributeError("_ARRAY_API not found"))
    inc = root(fn)
    assert (inc.rule, inc.title) == ("import_failure", "a module built for NumPy 1.x, under NumPy 2")
    assert '`python -m pip install "numpy<2"`' in " ".join(guide(inc).split())


def test_a_cudnn_found_before_the_one_torch_ships() -> None:
    fn = _raise(
        RuntimeError(
            "cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) but found runtime version (8, 5, 0). "
            "PyTorch already comes bundled with cuDNN."
        )
    )
    inc = root(fn)
    assert inc.rule == "import_failure" and (inc.facts["cudnn_torch"], inc.facts["cudnn_found"]) == ("8, 9, 2", "8, 5, 0")
    assert "Take the other cuDNN's directory off `LD_LIBRARY_PATH`" in " ".join(guide(inc).split())


def test_numpy_not_available_to_torch_names_both_ways_it_happens() -> None:
    inc = root(_raise(RuntimeError("Numpy is not available")))
    assert inc.rule == "import_failure"
    text = " ".join(guide(inc).split())
    assert "Either NumPy is not installed" in text and "`python -m pip install numpy`" in text
