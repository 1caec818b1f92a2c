"""PyTorch and MONAI message templates (grammars/messages.lark): the values each one names, the
roles of the shapes it names, and the op on the source line that raised it."""

from __future__ import annotations

import re

from kbdebug.normalise import Line
from kbdebug.parse.common import State, read_at
from kbdebug.parse.grammar import anchors, first_alt, parse, token, tokens
from kbdebug.records import ArchWarning, TorchMessage

_INDEX_OPS = re.compile(r"\b(gather|scatter(?:_add|_reduce)?_?|take_along_dim|index_select|index_put_?|index_add_?|embedding)\(")


class MessageReader(State):
    def messages(self, line: Line, text: str) -> None:
        """Read the first message template in the line; where one may start is derived from messages.lark."""
        for start in anchors("messages").starts(text):
            if self.message(line, text[start:]):
                return

    def message(self, line: Line, text: str) -> bool:
        tree = parse("messages", text)
        if tree is None:
            return False
        alt = first_alt(tree)
        template = alt.data
        shapes = [[int(x) for x in tokens(s, "INT")] for s in alt.find_data("shape")]
        ints = [int(str(c)) for c in alt.children if getattr(c, "type", None) in ("INT", "SIGNED")]
        words = [
            str(c).strip("\"'")
            for c in alt.children
            if getattr(c, "type", None)
            in (
                "WORD",
                "DEVICE",
                "TENSOR_TYPE",
                "OP_NAME",
                "ATEN_OP",
                "FN_NAME",
                "BACKWARD_NAME",
                "QUOTED_NAME",
                "CONV_KIND",
                "ARCH",
                "GPU_NAME",
            )
        ]
        values: dict = {}
        if template in ("broadcast", "expand"):
            values = {"size_a": ints[0], "size_b": ints[1], "dim": ints[2]}
        elif template == "broadcast_fake" and len(shapes) == 2:
            values = {"size_a": ints[0], "dim": ints[1], "argument_index": ints[2]}
        elif template == "cat_sizes":
            values = {"dim": ints[0], "size_a": ints[1], "size_b": ints[2], "tensor_number": ints[3]}
        elif template == "matmul_dim":
            values = {"mat1_dim": ints[0], "mat2_dim": ints[1]}
        elif template == "conv_dims":
            values = {"expected_dims": ints[0], "weight_dims": ints[1], "got_dims": ints[2]}
        elif template == "conv_input":
            values = {"op": words[0]}
        elif template in ("device_fake", "device_type_old"):
            devs = words[1:] if template == "device_fake" else words  # device_fake names the op first
            values = {"device_a": devs[-2], "device_b": devs[-1]} if len(devs) >= 2 else {}
            if template == "device_fake":
                values["op"] = words[0]
        elif template == "matmul":
            shapes = [[ints[0], ints[1]], [ints[2], ints[3]]]
        elif template == "conv":
            values = {"groups": ints[0], "expected_channels": ints[1], "got_channels": ints[2], "kind": words[0]}
        elif template == "batch_size":
            values = {"input_batch": ints[0], "target_batch": ints[1]}
        elif template in ("spatial_target", "spatial_input"):
            values = {"expected_dims": ints[0]}
            if len(ints) > 1:
                values["got_dims"] = ints[1]
        elif template in ("scalar_type", "scalar_type_old", "not_implemented"):
            values = {"expected": words[0], "found": words[1]} if len(words) > 1 else {}
        elif template == "target_oob":
            values = {"target": ints[0]}
        elif template == "bce_range":
            values = {"which": words[0]}
        elif template == "index_oob":
            values = {"index": ints[0], "dim": ints[1], "size": ints[2]}
            op = self._calling_op(_INDEX_OPS)
            if op:
                values["op"] = op
        elif template == "target_size_nd":
            if len(shapes) == 2 and len(shapes[1]) == len(shapes[0]) + 1 and shapes[1][1] == 1:
                values["extra_singleton_dim"] = 1
        elif template == "device_expected":
            values = {"device_a": words[0], "device_b": words[1]}
        elif template in ("device_mismatch",):
            values = {"device_a": words[0], "device_b": words[1]}
        elif template == "device_mismatch_new":
            values = {"argument": words[0], "device_a": words[1], "device_b": words[2]}
        elif template == "input_weight_type":
            values = {"input_type": words[0], "weight_type": words[1]}
        elif template in ("deterministic", "anomaly_nan", "anomaly_detected"):
            values = {"op": words[0]}
            if template != "deterministic":
                values["backward_function"] = words[0]
        elif template == "target_dtype":
            values = {"expected": " or ".join(words[:-1]), "found": words[-1]}
        elif template == "arch_incompatible":
            self.arch = ArchWarning(**read_at(line), gpu_name=words[0].strip(), device_capability=words[1])
            self.out.append(self.arch)
            return True
        elif template == "arch_supported":
            if self.arch is not None:
                self.arch.supported_archs = [w for w in words if w.startswith("sm_")]
                self.arch.last_line = line.no
            return True
        rest = token(tree, "REST")
        body = text[: len(text) - len(rest)] if rest else text
        roles = {name: [int(x) for x in tokens(sub, "INT")] for name in ("input_shape", "target_shape") for sub in alt.find_data(name)}
        self.out.append(
            TorchMessage(
                **read_at(line),
                template=template,
                text=body.strip(),
                values=values,
                shapes=shapes,
                input_shape=roles.get("input_shape"),
                target_shape=roles.get("target_shape"),
            )
        )
        return True

    def _calling_op(self, pattern: re.Pattern[str]) -> str | None:
        """The op named on the source line that raised, when the traceback printed it."""
        frames = self.exc.frames if self.exc is not None and self.exc.frames else self.frames
        for frame in reversed(frames[-3:]):
            m = pattern.search(frame.code or "")
            if m:
                return m.group(1)
        return None
