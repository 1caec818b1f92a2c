"""The pages a person reads: the dashboard of crash groups and one group's page (jinja2, autoescaped).

Every value on them comes from a log or a poster, so every one is escaped by jinja's autoescape; the
guides are Markdown rendered by kbdebug's own renderer, which escapes raw HTML. The plot of occurrences
is inline SVG drawn here: the pages load nothing from elsewhere and run no script.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache
from typing import Any

import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from sqlalchemy import Engine

from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.render.markup import to_html
from kbdebug.server import store

PLOT_WINDOW = timedelta(days=14)  # the dashboard's plot when no time filter is given
SINCE_CHOICES = (("", "any time"), ("1h", "last hour"), ("24h", "last 24 hours"), ("7d", "last 7 days"), ("30d", "last 30 days"))


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


def plot(start: datetime, step: timedelta, counts: list[int], width: int = 760, height: int = 120) -> dict[str, Any]:
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
        "unit": "hour" if step < timedelta(days=1) else "day",
    }


def mount(app: FastAPI, engine: Engine) -> None:
    from kbdebug.server.app import parse_since

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def dashboard(rule: str | None = None, job: str | None = None, since: str | None = None) -> str:
        filters = store.Filters(rule or None, job or None, parse_since(since))
        groups = store.groups(engine, filters)
        window = (store.utcnow() - filters.since) if filters.since is not None else PLOT_WINDOW
        series = plot(*store.timeline(engine, filters, window))
        rules = store.rules_seen(engine)
        return (
            _env()
            .get_template("dashboard.html.j2")
            .render(groups=groups, plot=series, rules=rules, rule=rule or "", job=job or "", since=since or "", since_choices=SINCE_CHOICES)
        )

    @app.get("/crashes/{signature}", response_class=HTMLResponse, include_in_schema=False)
    async def group_page(signature: str, request: Request) -> str:
        found = await run_in_threadpool(store.group, engine, signature)
        if found is None:
            raise HTTPException(404, f"no crash with signature {signature!r}")
        root = (found["diagnosis"].get("incidents") or [{}])[0]
        facts = [(k, v) for k, v in (root.get("facts") or {}).items() if v not in (None, "", [], {}) and not isinstance(v, dict | bool)]
        return _env().get_template("group.html.j2").render(g=found, root=root, sections=SECTIONS, facts=facts)
