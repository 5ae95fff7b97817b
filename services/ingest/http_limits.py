"""Bounds on what one HTTP connection may cost ingest before its request is complete (issue 17).

uvicorn (0.55) with httptools bounds none of these: a request head of any size is read and
parsed (httptools grows one header value by `bytes +=` per chunk, so a 100 MB header cost ~10 s
of CPU on the event loop), and a head or a body that never finishes keeps its connection forever.
uvicorn's own options cover two bounds, `timeout_keep_alive` and `limit_concurrency`;
`h11_max_incomplete_event_size` applies to the h11 protocol only. The rest is enforced here,
by a subclass of uvicorn's `HttpToolsProtocol` passed as `http=` to `uvicorn.Config`:

- the request head (request line + headers) is fed to the parser at most `max_header_bytes` at a
  time; once that much has been read without the head ending, ingest answers 431 and closes,
  reading nothing more. At most `max_headers` headers (431 on the next one);
- `header_timeout_s` from the first byte of a head to its end, `body_timeout_s` from the end of
  the head to the end of the body (a Content-Length larger than what is sent, a chunked body that
  never ends): 408 and close;
- a connection with no request in progress is closed after `keep_alive_s` (uvicorn arms that
  timer only after a response; it is armed on connect too, so a connection that sends nothing is
  closed as well);
- at `max_connections` open connections (or requests in flight), new requests get uvicorn's 503
  (load, not input: retry later).

Every answer given here is counted in `ingest_http_refused_total{status,reason}` and every
connection closed without an answer in `ingest_http_closed_total{reason}`, on ingest's registry.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import httptools
import uvicorn
from prometheus_client import CollectorRegistry
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from services.runtime.metric_families import Families

log = logging.getLogger("incident_memory.ingest")


@dataclass(frozen=True)
class HttpLimits:
    max_header_bytes: int = 32 * 1024  # request line + headers; Slack's and Alertmanager's are < 2 KiB
    max_headers: int = 100
    header_timeout_s: float = 10.0  # first byte of a request to the end of its headers
    body_timeout_s: float = 30.0  # end of the headers to the end of the body (~1 MB at >= 35 KB/s)
    keep_alive_s: int = 5  # idle connection, before its first request or between requests
    max_connections: int = 1000  # uvicorn's limit_concurrency: open connections or requests in flight

    def problems(self) -> list[str]:
        """What is out of range, for a one-line error."""
        out = [
            name
            for name, value in (
                ("max_header_bytes", self.max_header_bytes),
                ("max_headers", self.max_headers),
                ("header_timeout_s", self.header_timeout_s),
                ("body_timeout_s", self.body_timeout_s),
                ("keep_alive_s", self.keep_alive_s),
                ("max_connections", self.max_connections),
            )
            if not value > 0
        ]
        if 0 < self.max_header_bytes < 1024:
            out.append("max_header_bytes (at least 1024)")
        return out


class LimitMetrics:
    """The counters of this module, on ingest's registry (so `/metrics` shows them)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry)
        self.refused = f.counter(
            "ingest_http_refused",
            "Requests answered by the HTTP server itself, before the app: bounds and malformed HTTP",
            "status",
            "reason",
        )
        self.closed = f.counter(
            "ingest_http_closed",
            "Connections closed by a bound without an answer (idle, or a request already answered)",
            "reason",
        )


class _Refusal(Exception):
    """Raised from a parser callback to stop parsing: feed_data re-raises it as its __context__."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds above. `limits` and `metrics` are set on the
    class `protocol_class` returns (uvicorn builds one instance per connection)."""

    limits: HttpLimits = HttpLimits()
    metrics: LimitMetrics | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_body = False  # between the end of a head and the end of its message
        self._head_bytes = 0  # bytes fed to the parser since the last message ended, outside a body
        self._head_size = 0  # the head as parsed: url + every "name: value\r\n"
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._done = False  # refused or closed here: read nothing more

    # --- connection ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn arms its keep-alive timer only after a response: a connection that never sends
        # a byte would stay open. Any byte cancels it (data_received), as after a response.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self._count_closed("idle")
        super().timeout_keep_alive_handler()

    def handle_websocket_upgrade(self) -> None:
        self._cancel_timers()
        super().handle_websocket_upgrade()

    def data_received(self, data: bytes) -> None:
        """uvicorn's data_received, but a head is fed at most up to the byte limit."""
        if self._done:
            return
        self._unset_keepalive_if_required()
        if not self._in_body and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_too_slow)
        view = memoryview(data)
        while view:
            if self._in_body:
                self._feed(view)
                return
            room = self.limits.max_header_bytes - self._head_bytes
            if room <= 0:
                self._refuse(431, "header_too_large")
                return
            piece, view = view[:room], view[room:]
            self._head_bytes += len(piece)
            if not self._feed(piece):
                return

    def _feed(self, data: memoryview) -> bool:
        """Feed the parser; False when it must not be fed again (refused, bad request, upgrade)."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _Refusal):
                self._refuse(exc.__context__.status, exc.__context__.reason)
            else:
                self._bad_request()
            return False
        except httptools.HttpParserError:
            self._bad_request()
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        return not self._done and not self.transport.is_closing()

    # --- parser callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._head_size = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.limits.max_headers:
            raise _Refusal(431, "too_many_headers")
        self._head_size += len(name) + len(value) + 4
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._cancel(self._head_timer)
        self._head_timer = None
        # The bytes fed are bounded above; this bounds the head itself when a pipelined request
        # began inside a piece fed with the previous one (those bytes were not counted).
        if self._head_size > self.limits.max_header_bytes:
            raise _Refusal(431, "header_too_large")
        self._in_body = True
        self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_too_slow)
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self._count_refused(503, "over_capacity")  # uvicorn answers it (service_unavailable)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._cancel(self._body_timer)
        self._body_timer = None
        self._in_body = False
        self._head_bytes = 0
        super().on_message_complete()

    # --- refusals -----------------------------------------------------------------------

    def _head_too_slow(self) -> None:
        self._head_timer = None
        self._refuse(408, "header_timeout")

    def _body_too_slow(self) -> None:
        self._body_timer = None
        self._refuse(408, "body_timeout")

    def _bad_request(self) -> None:
        self._refuse(400, "bad_http")  # what uvicorn answers too, counted and closed here

    def _refuse(self, status: int, reason: str) -> None:
        """Answer `status` with a JSON reason and close, unless another response is on the wire
        (then only close). Reads nothing more either way."""
        if self._done or self.transport.is_closing():
            return
        self._done = True
        self._cancel_timers()
        self._unset_keepalive_if_required()
        cycle = self.cycle
        if self._in_body:  # this request's own cycle, unless it waits behind a pipelined one
            answer = cycle is not None and not cycle.response_started and not self.pipeline
            if answer and cycle is not None:  # the app waiting for the body sees a disconnect
                cycle.disconnected = True
                cycle.message_event.set()
        else:  # a head: answer it unless a previous request's response is still to be written
            answer = cycle is None or cycle.response_complete
        if answer:
            self._count_refused(status, reason)
            body = json.dumps({"ok": False, "error": reason}).encode()
            content = [STATUS_LINE[status]]
            for name, value in self.server_state.default_headers:
                content.extend([name, b": ", value, b"\r\n"])
            content.extend(
                [
                    b"content-type: application/json\r\n",
                    b"content-length: " + str(len(body)).encode() + b"\r\n",
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
            self.transport.write(b"".join(content))
        else:
            self._count_closed(reason)
        # debug, not info: a flood of these must not cost a log line each (the counters count them)
        log.debug("http refused", extra={"status": status if answer else None, "reason": reason,
                                         "client": self.client})  # fmt: skip
        self.transport.close()

    def _count_refused(self, status: int, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.refused.labels(str(status), reason).inc()

    def _count_closed(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.closed.labels(reason).inc()

    def _cancel_timers(self) -> None:
        self._cancel(self._head_timer)
        self._cancel(self._body_timer)
        self._head_timer = self._body_timer = None

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()


def protocol_class(limits: HttpLimits, metrics: LimitMetrics | None) -> type[LimitedHttpToolsProtocol]:
    """A protocol class bound to these limits and counters (uvicorn takes a class, not a factory)."""
    bound: type[LimitedHttpToolsProtocol] = type(
        "IngestHttpProtocol", (LimitedHttpToolsProtocol,), {"limits": limits, "metrics": metrics}
    )
    return bound


def server_config(
    app: Any, limits: HttpLimits, registry: CollectorRegistry | None, **kwargs: Any
) -> uvicorn.Config:
    """uvicorn's Config with every bound of `limits`; `kwargs` go to uvicorn.Config as they are."""
    metrics = LimitMetrics(registry) if registry is not None else None
    return uvicorn.Config(
        app,
        http=protocol_class(limits, metrics),
        timeout_keep_alive=limits.keep_alive_s,
        limit_concurrency=limits.max_connections,
        **kwargs,
    )
