"""/v1/health (open to all: a liveness probe needs no token) and /v1/rules."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from kbdebug._version import __version__
from kbdebug.diagnoser.signature import SIGNATURE_VERSION
from kbdebug.server import db, models, store, triage
from kbdebug.server.deps import EngineDep, Readable, check_host

router = APIRouter(prefix="/v1", tags=["service"], responses=models.ERRORS)


@router.get("/health", summary="Liveness, and proof that the database takes a write", response_model=models.Health)
def get_health(engine: EngineDep) -> models.Health:
    """503 (with Retry-After) when a write cannot be committed: read-only, full, locked or down."""
    triage.check_write(engine)
    return models.Health(
        status="ok", version=__version__, schema_version=db.SCHEMA_VERSION, signature_version=SIGNATURE_VERSION, reports=store.count(engine)
    )


@router.get(
    "/rules", summary="The rules this server diagnoses with", response_model=models.Rules, dependencies=[Depends(check_host), Readable]
)
def get_rules() -> models.Rules:
    from kbdebug.kb import load_kb

    rules = sorted(load_kb().rules, key=lambda r: r.id)
    return models.Rules(rules=[models.Rule(id=r.id, title=r.title, priority=r.priority, retry=r.retry) for r in rules])
