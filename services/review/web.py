"""The review page's HTTP side: Starlette routes, content negotiation, and the security headers.

HTML and JSON come from the same view dict (services/review/model.py); `Accept: application/json`
gets the dict. Every answer carries a strict Content-Security-Policy: scripts only from this origin
(review.js, no inline script), no plugins, no framing, no base-URI or form hijack. Templates
autoescape everything; nothing is marked safe.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from services.boundary.redact import redact_text, redact_value
from services.review import pages
from services.review.db import Reader
from services.review.diff_page import diff_view

HERE = Path(__file__).parent
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_FILTER_VALUE = re.compile(r"^[\w .:@/-]{1,120}$")


def _redacted(value: Any) -> Any:
    return redact_text(value) if isinstance(value, str) else value


def environment(redact: bool = True) -> jinja2.Environment:
    """Autoescape on for every template (not only *.html), undefined names an error, and (unless the
    operator turned it off) every value written through the redactor before it is escaped."""
    env = jinja2.Environment(
        finalize=_redacted if redact else None,
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["n"] = lambda v: "-" if v is None else f"{v:,}"
    return env


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def _filter(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    return value if value and _FILTER_VALUE.match(value) else None


def _day(request: Request) -> date | None:
    try:
        return date.fromisoformat(request.query_params.get("date", ""))
    except ValueError:
        return None


def _int(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name, "")
    return int(value) if value.isdigit() and len(value) < 10 else default


class ReviewApp:
    """The routes over one Reader; `channels` is the deployment's optional allow-list."""

    def __init__(self, reader: Reader, channels: frozenset[str] | None = None, redact: bool = True) -> None:
        self.reader = reader
        self.channels = channels
        self.redact = redact
        self.templates = Jinja2Templates(env=environment(redact))

    def answer(self, request: Request, template: str, view: dict[str, Any], status: int = 200) -> Response:
        # Every string shown, raw lines included, passes the model boundary's redactor: what the trust
        # boundary keeps from the model is not shown here either (typed markers keep the line's shape).
        # Counts are computed before, on the raw itself. HTML: each value as it is written (finalize).
        if wants_json(request):
            return JSONResponse(redact_value(view) if self.redact else view, status_code=status)
        return self.templates.TemplateResponse(request, template, {"v": view}, status_code=status)

    def not_found(self, request: Request, what: str) -> Response:
        return self.answer(request, "error.html", {"error": f"no {what}"}, status=404)

    def incidents(self, request: Request) -> Response:
        filters = {k: _filter(request, k) for k in ("service", "state", "alert", "channel", "q")}
        with self.reader.connection() as conn:
            view = pages.incidents(conn, filters, _day(request), self.channels)
        return self.answer(request, "incidents.html", view)

    def thread(self, request: Request) -> Response:
        thread_ts = request.path_params["thread_ts"]
        with self.reader.connection() as conn:
            view = pages.thread(conn, thread_ts, self.channels)
        return (
            self.not_found(request, "such thread")
            if view is None
            else self.answer(request, "thread.html", view)
        )

    def calls(self, request: Request) -> Response:
        with self.reader.connection() as conn:
            view = pages.model_calls(conn, request.path_params["thread_ts"], self.channels)
        return (
            self.not_found(request, "such thread")
            if view is None
            else self.answer(request, "calls.html", view)
        )

    def row(self, request: Request) -> Response:
        thread_ts, row_id = request.path_params["thread_ts"], request.path_params["row_id"]
        offset, pattern = _int(request, "offset", 0), request.query_params.get("pattern")
        with self.reader.connection() as conn:
            view = pages.row(conn, thread_ts, row_id, offset, pattern, self.channels)
        return self.not_found(request, "such row") if view is None else self.answer(request, "row.html", view)

    def diff(self, request: Request) -> Response:
        """The page's schema against `after`; not offered under a channel allow-list (it spans threads)."""
        if self.channels is not None:
            return self.not_found(request, "diff under a channel allow-list")
        with self.reader.connection() as conn:
            view = diff_view(conn, self.reader.schema, request.path_params["after"])
        return (
            self.not_found(request, "such projection")
            if view is None
            else self.answer(request, "diff.html", view)
        )


def security_headers(
    app: Callable[..., Awaitable[None]],
) -> Callable[..., Awaitable[None]]:
    """ASGI middleware adding SECURITY_HEADERS to every HTTP answer, static files and errors included."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Callable[..., Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in _LOWER]
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_headers)

    return wrapped


_LOWER = {k.lower() for k in SECURITY_HEADERS}


def build_app(reader: Reader, channels: frozenset[str] | None = None, *, redact: bool = True) -> Any:
    review = ReviewApp(reader, channels, redact)

    app = Starlette(
        routes=[
            Route("/", review.incidents, methods=["GET", "HEAD"]),
            Route("/threads/{thread_ts}", review.thread, methods=["GET", "HEAD"]),
            Route("/threads/{thread_ts}/rows/{row_id}", review.row, methods=["GET", "HEAD"]),
            Route("/threads/{thread_ts}/calls", review.calls, methods=["GET", "HEAD"]),
            Route("/diff/{after}", review.diff, methods=["GET", "HEAD"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
    )
    return security_headers(app)
