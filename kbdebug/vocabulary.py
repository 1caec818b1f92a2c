"""The facts an incident may carry beyond what its records say, declared once, with what each means.

Records declare their own facts (`Record.FACTS`, `FIELD_FACTS`, `FACTS_FROM_GRAMMAR`). The facts here
come from the context a diagnosis is made in: the live frames of `diagnose(exc)`, the matcher, the
context reader (kbdebug.diagnoser.context) and the guide filler. `kbdebug rules lint` checks a guide's variables
against these declarations and the records' (kbdebug.authoring.facts), and
tests/test_fact_declarations.py checks that nothing sets a fact missing from them.
"""

from __future__ import annotations

from typing import Final

# Facts any incident may carry, whatever its rule.
CONTEXT_FACTS: Final[dict[str, str]] = {
    # the exception the user saw (from a traceback's record, or read live by diagnose(exc))
    "error_type": "the exception type as printed",
    "error_message": "the first line of the exception message",
    "innermost_user_frame": "`file.py:LINE` of the innermost frame of the user's own code",
    "user_function": "the function of that frame",
    "user_code": "the source line of that frame",
    "raised_at": "`file:LINE` of the innermost frame",
    "raised_code": "the source line of the innermost frame that printed one",
    "frame_tensors": "shape, dtype, device (and min/max on the CPU) of the tensors named on the failing line",
    "rank": "the rank that printed the evidence",
    "shapes": "the shapes an error names, as lists of ints",
    "input_shape": "the prediction's shape in a prediction/label pair",
    "target_shape": "the label's shape in a prediction/label pair",
    "shape_relation": "how prediction and label differ: channel, class, spatial, rank or batch",
    "differing_dims": "the dims in which prediction and label differ",
    "input_channels": "dim 1 of the prediction",
    "target_channels": "dim 1 of the label",
    # the matcher
    "retry": "what rerunning does: no, smaller, yes or after-install (from the rule, or the match that found it)",
    "inferred_from": "the phrases an inferred cause was recognised by (only below confidence 0.8)",
    # the context reader (kbdebug.diagnoser.context)
    "origin": "where the text came from: log, script, notebook, run or rerun",
    "device": "cuda or cpu, where the evidence says",
    "launch_blocking": "kernel launches were already synchronous (CUDA_LAUNCH_BLOCKING=1)",
    "libraries": "the installed packages the traceback's frames run through",
    "index_tensor": "the integer tensor on the failing line (a target, an index)",
    "index_min": "its smallest value",
    "index_max": "its largest value",
    "scores_tensor": "the floating tensor of rank >= 2 on the failing line (the scores)",
    "num_classes": "the class count: the call's literal setting, or the scores' dim 1",
    "call_settings": "the literal keyword arguments on the failing line",
    "launcher": "the launcher the log shows the job ran under (`torchrun`)",
    "launch": "the command the run was launched with, for commands that rerun it",
    "label_name": "the label's name on the failing line (by how code names labels)",
    "pred_name": "the prediction's name on the failing line",
    "dtype_found": "the dtype that clashed, as torch names it (`float64`)",
    "dtype_wanted": "the dtype the op wanted",
    "cast_call": "the call that converts to the wanted dtype (`.float()`)",
    "odd_operand": "which operand of the message holds the odd dtype (`mat1`, `input`)",
    "cast_tensor": "the failing line's tensor to convert",
    "viewed_tensor": "the tensor the failing line views or reshapes",
    "viewed_shape": "its shape",
    # the live frames (kbdebug.live)
    "frame_modules": "the modules the failing function holds, with their parameter and trainable counts",
    "inplace_candidates": "the failing function's in-place writes to a tensor of the saved tensor's shape",
    "inplace_layers": "layers built with inplace=True in the failing function's modules",
    # diagnose(exc) (kbdebug.api), when reading the exception failed: it never raises
    "kbdebug_failure": "what kbdebug itself failed on while reading the exception (`RecursionError: ...`)",
    # a plain Python error (kbdebug.diagnoser.plain from its message and failing line; kbdebug.plain_errors live)
    "inner_error_type": "the type of the error a multi-line message re-raises (a DataLoader worker's)",
    "inner_error_message": "its message",
    "inner_code": "its failing line, as the message prints it",
    "missing_key": "the key a KeyError names, as printed (`'image'`)",
    "looked_up_in": 'the expression of the failing line the key was looked up in (`cfg["training"]`)',
    "available_keys": "live: the first keys that mapping holds, as repr()",
    "key_count": "live: how many keys it holds",
    "indexed": "the subscripts of the failing line of an IndexError (`sys.argv[1]`)",
    "sequence_name": "live: the subscripted expression that is too short (or the call that returned it)",
    "sequence_length": "live: its length",
    "index_value": "live: the index it was asked for",
    "sequence_items": "live: the first items of a list unpacked or searched (`classes.index(x)`), as repr()",
    "sequence_from_call": "live: the too-short sequence is a call's result, not read again",
    "attribute_of": "the expression whose attribute (or subscript) failed (`img`)",
    "attribute_of_type": "its type as the message names it (`NoneType`)",
    "missing_attribute": "the attribute an AttributeError names",
    "none_from": "live: the right-hand side of the last assignment of that None before the failing line",
    "undefined_name": "the name a NameError names",
    "similar_names": "live: names defined there that are close to it",
    # the guide filler
    "script": "the script to rerun: the user's frame's file, or the command's",
}

# What `kbdebug.guard()` reports with the error it raises (rules that name `guard_ops`).
GUARD_FACTS: Final[dict[str, str]] = {
    "op": "the guarded op",
    "argument": "the argument that failed its check",
    "bad_value": "the first bad value",
    "position": "its position",
    "positions": "the first bad positions",
    "bad_count": "how many values are bad",
    "numel": "the argument's element count",
    "bad_values": "the distinct bad values (the first ten)",
    "shape": "the argument's shape",
    "innermost_user_frame": "the user's call site",
    "user_code": "its source line",
    "target": "the first bad target",
    "index": "the first bad index",
    "valid_range": "the range the values must be in",
    "num_classes": "the class count the op was given",
    "num_embeddings": "the embedding's row count",
    "ignore_index": "the loss's ignore_index",
    "dim": "the indexed dim",
    "size": "the size of the indexed dim",
    "min": "the argument's smallest value",
    "max": "the argument's largest value",
    "zero_rows": "rows of a probability tensor that sum to zero",
}
