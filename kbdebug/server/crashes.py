"""/v1/crashes: the crash groups (one per root signature), one group with its occurrences, its triage
(open, resolved, ignored; regressed is set when a resolved group is seen again) and its deletion."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from kbdebug.server import models, store, triage
from kbdebug.server.deps import EngineDep, Readable, SinceDep, Writable

router = APIRouter(prefix="/v1/crashes", tags=["crashes"], responses=models.ERRORS)
Status = Annotated[str | None, Query(pattern="^(open|resolved|ignored|regressed)$")]


@router.get(
    "", summary="Crash groups, one per root signature, most recently seen first", response_model=models.Crashes, dependencies=[Readable]
)
def get_crashes(
    engine: EngineDep,
    since: SinceDep,
    rule: str | None = None,
    job: str | None = None,
    status: Status = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> dict[str, object]:
    return {"crashes": store.groups(engine, store.Filters(rule, job, since, status=status), limit)}


@router.get(
    "/{signature}",
    summary="One crash group: summary, latest diagnosis and every occurrence",
    response_model=models.GroupDetail,
    dependencies=[Readable],
    responses={404: {"model": models.Problem}},
)
def get_crash(signature: str, engine: EngineDep) -> dict[str, object]:
    found = store.group(engine, signature)
    if found is None:
        raise _unknown(signature)
    return found


@router.patch(
    "/{signature}",
    summary="Triage a group: mark it open, resolved or ignored",
    response_model=models.Triage,
    dependencies=[Writable],
    responses={404: {"model": models.Problem}},
)
def patch_crash(signature: str, body: models.Triage, engine: EngineDep) -> models.Triage:
    """A resolved group that occurs again becomes `regressed` (and the webhook says so, once)."""
    if not triage.set_status(engine, signature, body.status):
        raise _unknown(signature)
    return body


@router.delete(
    "/{signature}",
    summary="Delete a group and every report in it",
    response_model=models.Deleted,
    dependencies=[Writable],
    responses={404: {"model": models.Problem}},
)
def delete_crash(signature: str, engine: EngineDep) -> models.Deleted:
    gone = triage.delete_group(engine, signature)
    if gone < 0:
        raise _unknown(signature)
    return models.Deleted(deleted=gone)


def _unknown(signature: str) -> HTTPException:
    """The 404 of a signature no group has (its head only: the path is the client's text)."""
    return HTTPException(404, f"no crash with signature {signature[:40]!r}")
