"""A posted log's diagnosis as the service stores it and answers it, made in the worker that diagnosed it.

The server's one event loop takes every post, stores it and answers it, while the diagnoses run in worker
processes (kbdebug.server.worker) on the other cores. Turning a `Diagnosis` into the data the reports table
keeps (`model_dump`) and into the answer (what `explain --format json` prints), and encoding both as JSON,
was a fifth of the server's own work on a post, and rebuilding the Diagnosis a worker sent back more of it.
A worker hands back `Prepared` instead: the few values the tables index, and both JSON texts already
encoded. The server writes the one (the engine passes `EncodedJSON` through as it is: kbdebug.server.db)
and sends the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kbdebug.diagnosis import Diagnosis
from kbdebug.render import json_object
from kbdebug.server.db import EncodedJSON


@dataclass(frozen=True)
class Prepared:
    signature: str  # the root incident's ('' when nothing was recognised): its group
    signature_key: str
    rule: str
    title: str
    retry: str
    data: EncodedJSON  # the Diagnosis itself (`model_dump`), which a report is stored as
    answer: bytes  # the answer to the post: `explain --format json`'s object, encoded as a JSON response is


def prepare(diag: Diagnosis) -> Prepared:
    root = diag.root
    return Prepared(
        signature=root.signature if root is not None else "",
        signature_key=root.signature_key if root is not None else "",
        rule=root.rule if root is not None else "",
        title=root.title if root is not None else "",
        retry=str((root.facts.get("retry") if root is not None else "") or ""),
        data=EncodedJSON(json.dumps(diag.model_dump(mode="json"))),
        answer=response_body(json_object(diag)),
    )


def response_body(obj: object) -> bytes:
    """JSON as the service's JSON responses encode it (Starlette's JSONResponse): compact, text as is."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")
