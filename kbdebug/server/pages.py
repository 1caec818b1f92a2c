"""The pages a person reads: the dashboard of crash groups, one group's page with its triage, and /docs
(the API, drawn here from the OpenAPI schema: nothing is loaded from elsewhere, so it works offline).

Every value on them comes from a log or a poster, so every one is escaped by jinja's autoescape; the
guides are Markdown rendered by kbdebug's own renderer, which escapes raw HTML. The plot of occurrences
is inline SVG drawn here: the pages load nothing from elsewhere and run no script. A page's size is
bounded whatever its range: the plot has at most MAX_BARS bars and starts no earlier than the first report.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache
from typing import Annotated, Any

import jinja2
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse
from markupsafe import Markup

from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.render import fact_rows
from kbdebug.render.markup import to_html
from kbdebug.server import store, triage
from kbdebug.server.deps import EngineDep, Readable, SinceDep, Writable

PLOT_WINDOW = timedelta(days=14)  # the dashboard's plot when no time filter is given
MAX_BARS = 180
STEPS = (("hour", timedelta(hours=1)), ("day", timedelta(days=1)), ("week", timedelta(weeks=1)), ("30 days", timedelta(days=30)))
SINCE_CHOICES = (("", "any time"), ("1h", "last hour"), ("24h", "last 24 hours"), ("7d", "last 7 days"), ("30d", "last 30 days"))

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kbdebug", "server/templates"),
        autoescape=True,
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = lambda text: Markup(to_html(str(text or "")))
    env.filters["when"] = _when
    return env


def _when(iso: str, form: str = "long") -> str:
    """`2026-12-05 07:31 UTC`, or `12-05 07:31` in the dashboard's narrow columns: minutes are enough to read by."""
    return datetime.fromisoformat(iso).strftime("%m-%d %H:%M" if form == "short" else "%Y-%m-%d %H:%M UTC")


def buckets(start: datetime, now: datetime) -> tuple[datetime, timedelta, str, int]:
    """The plot's buckets from `start` to now: hours up to two days, then days, weeks or 30 days, the
    smallest that needs at most MAX_BARS of them (wider still when even those would not do)."""
    window = max(now - start, timedelta(hours=1))
    unit, step = "bar", window / (MAX_BARS - 2)  # when even 30 days a bar would be too many
    for name, size in STEPS if window <= timedelta(days=2) else STEPS[1:]:
        if window / size < MAX_BARS:
            unit, step = name, size
            break
    if step < timedelta(days=1):
        start = start.replace(minute=0, second=0, microsecond=0)
    else:
        start = start.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, step, unit, min(int((now - start) / step) + 1, MAX_BARS)


def plot(start: datetime, step: timedelta, counts: list[int], width: int = 760, height: int = 120, unit: str = "") -> dict[str, Any]:
    """Bars of an occurrences-per-bucket series, with their hover titles and the axis labels."""
    top = max(counts, default=0) or 1
    bar = width / max(len(counts), 1)
    fmt = "%m-%d %H:00" if step < timedelta(days=1) else "%Y-%m-%d"
    bars = []
    for i, n in enumerate(counts):
        h = round((height - 4) * n / top, 1)
        when = (start + i * step).strftime(fmt)
        bars.append({"x": round(i * bar, 1), "y": round(height - h, 1), "w": max(round(bar - 1, 1), 1), "h": h, "title": f"{when}: {n}"})
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "top": max(counts, default=0),
        "total": sum(counts),
        "first": start.strftime(fmt),
        "last": (start + (len(counts) - 1) * step).strftime(fmt),
        "unit": unit or ("hour" if step < timedelta(days=1) else "day"),
    }


def _dashboard(engine: Any, rule: str | None, job: str | None, since: datetime | None, status: str | None) -> dict[str, Any]:
    filters = store.Filters(rule or None, job or None, since, status=status or None, hide_ignored=True)
    now = store.utcnow()
    start = since if since is not None else now - PLOT_WINDOW
    first = store.earliest(engine)
    if since is not None:  # a range reaching back before anything was stored draws only what was stored
        start = max(start, min(first or now, now - PLOT_WINDOW))
    start = min(start, now)
    start, step, unit, n = buckets(start, now)
    counts = store.timeline(engine, filters, start, step, n)
    unrecognised = store.unrecognised(engine, filters, limit=20)
    return {
        "groups": store.groups(engine, filters),
        "plot": plot(start, step, counts, unit=unit),
        "rules": store.rules_seen(engine),
        "unrecognised": unrecognised,
    }


@router.get("/", dependencies=[Readable])
async def dashboard(
    request: Request, engine: EngineDep, since: SinceDep, rule: str | None = None, job: str | None = None, status: str | None = None
) -> str:
    data = await run_in_threadpool(_dashboard, engine, rule, job, since, status)
    choice = request.query_params.get("since", "")
    return (
        _env()
        .get_template("dashboard.html.j2")
        .render(**data, rule=rule or "", job=job or "", since=choice, status=status or "", since_choices=SINCE_CHOICES)
    )


@router.get("/crashes/{signature}", dependencies=[Readable])
async def group_page(signature: str, engine: EngineDep) -> str:
    found = await run_in_threadpool(store.group, engine, signature)
    if found is None:
        raise HTTPException(404, f"no crash with signature {signature[:40]!r}")
    root = (found["diagnosis"].get("incidents") or [{}])[0]
    facts = fact_rows(root.get("facts") or {})  # the renderer's rows: what every report shows of the facts
    return _env().get_template("group.html.j2").render(g=found, root=root, sections=SECTIONS, facts=facts, statuses=triage.SETTABLE)


@router.post("/crashes/{signature}/status", dependencies=[Writable])
async def triage_form(
    signature: str, status: Annotated[str, Form(pattern="^(open|resolved|ignored)$")], engine: EngineDep
) -> RedirectResponse:
    """The group page's buttons: mark it, then show it again."""
    if not await run_in_threadpool(triage.set_status, engine, signature, status):
        raise HTTPException(404, f"no crash with signature {signature[:40]!r}")
    return RedirectResponse(f"/crashes/{signature}", status_code=303)


@router.get("/docs")
def docs(request: Request) -> str:
    """The API from /openapi.json as one page that loads nothing (FastAPI's own /docs loads Swagger UI
    from a CDN: blank on a cluster without internet)."""
    schema = request.app.openapi()
    return (
        _env()
        .get_template("docs.html.j2")
        .render(api=schema, paths=schema.get("paths", {}), schemas=schema.get("components", {}).get("schemas", {}))
    )
