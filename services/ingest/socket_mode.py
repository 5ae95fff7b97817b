"""Slack Socket Mode: the Events API over an outbound websocket, for clusters that take no inbound traffic.

Ingest opens the websocket itself (slack_sdk's aiohttp `SocketModeClient`, authenticated by the
app-level token, so no request signature is needed) and hands each `events_api` envelope's payload to
`Ingest.accept_slack`, the very path the HTTP endpoint takes: the same mapping, the same event_id
dedupe, the same events.

Ack = "Slack, do not send this again", so an envelope is acked only once it is settled: its events
acked by the broker, or deliberately ignored, or rejected as bad input (acked and counted; a bad
payload is never left to be redelivered forever). When the broker does not ack in time the envelope
stays unacked and Slack redelivers it (`retry_attempt` + 1); a redelivery of an event already produced
is dropped by the event_id dedupe. Envelope types ingest does not handle (interactive, slash commands)
are acked and counted.

The app token is checked before anything serves (`open`: apps.connections.open), so a missing or
refused token is a one-line error at start. Tokens are never logged (slack_sdk redacts the
Authorization header even at DEBUG; at DEBUG it does log the one-time websocket URL it is given).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from services.ingest.app import Ingest
from services.ingest.metrics import closed
from services.runtime.errors import UserFacingError
from services.runtime.logs import about

log = logging.getLogger("incident_memory.ingest.socket_mode")

DEFAULT_API_URL = "https://slack.com/api/"
ENDPOINT = "slack_socket"  # the endpoint label of Socket Mode's rejections and produced-event logs
# Label values from Slack's frames, closed (services/ingest/metrics.closed): anything else is "other".
ENVELOPE_TYPES = frozenset({"hello", "disconnect", "events_api", "slash_commands", "interactive"})
DISCONNECT_REASONS = frozenset({"warning", "refresh_requested", "link_disabled", "too_many_websockets"})

# apps.connections.open errors -> what the operator should do about SLACK_APP_TOKEN.
TOKEN_ERRORS = {
    "not_authed": "is empty",
    "invalid_auth": "was refused by Slack (invalid_auth): it is not a valid token",
    "not_allowed_token_type": (
        "was refused by Slack (not_allowed_token_type): it must be an app-level token (xapp-...), "
        "not a bot or user token"
    ),
    "missing_scope": "was refused by Slack (missing_scope): the app-level token needs connections:write",
    "token_revoked": "was refused by Slack (token_revoked): create a new app-level token",
    "token_expired": "was refused by Slack (token_expired): create a new app-level token",
    "account_inactive": "was refused by Slack (account_inactive): the app was uninstalled",
}


@dataclass(frozen=True)
class SocketModeConfig:
    app_token: str = field(repr=False)  # xapp-..., with connections:write
    bot_token: str | None = field(
        default=None, repr=False
    )  # the Web API client's token (not needed to connect)
    api_url: str = DEFAULT_API_URL
    ping_interval_s: float = 5.0  # slack_sdk pings this often and reconnects a stale websocket
    open_timeout_s: float = 10.0  # apps.connections.open, and each attempt to open the websocket
    drain_timeout_s: float = 5.0  # on shutdown: how long envelopes in flight may take to settle


def api_base_url(url: str | None) -> str:
    """slack_sdk joins method names onto its base URL, so it must end with a slash."""
    url = (url or "").strip() or DEFAULT_API_URL
    return url if url.endswith("/") else url + "/"


class SocketMode:
    """One Socket Mode connection feeding `Ingest.accept_slack`; a companion of the HTTP app (its
    lifespan calls `start` and `stop`), with `open` called before the server starts."""

    def __init__(self, config: SocketModeConfig, ingest: Ingest) -> None:
        self.config = config
        self.ingest = ingest
        self.metrics = ingest.metrics
        self.client: SocketModeClient | None = None
        self._url: str | None = None  # the first websocket URL, issued by `open`
        self._connecting: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._closed = False

    # --- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Build the client and check SLACK_APP_TOKEN by asking Slack for a websocket URL. Raises
        UserFacingError (one line, no token in it) when the token is missing, refused, or Slack's
        Web API does not answer. Must run on the loop that will serve."""
        if not self.config.app_token:
            raise UserFacingError(
                "SLACK_APP_TOKEN is not set (Socket Mode needs an app-level token, xapp-...)"
            )
        # The check runs before anything else and without slack_sdk's retry handlers, so a refused
        # token or an unreachable SLACK_API_URL is the one line the CLI prints, with no log around it.
        checker = AsyncWebClient(base_url=api_base_url(self.config.api_url), timeout=30, retry_handlers=[])
        self._url = await self._new_url(checker, at_start=True)
        web = AsyncWebClient(
            token=self.config.bot_token, base_url=api_base_url(self.config.api_url), timeout=30
        )
        self.client = SocketModeClient(
            app_token=self.config.app_token, web_client=web, ping_interval=self.config.ping_interval_s
        )
        self.client.on_message_listeners.append(self.on_raw)
        self.client.message_listeners.append(self.on_frame)
        self.client.socket_mode_request_listeners.append(self.on_request)
        self.metrics.socket_connected.set_function(self._connected)

    async def start(self) -> None:
        """Open the websocket (the server's lifespan, once the producer runs). Waits up to
        `open_timeout_s` for the first connection, then keeps trying in the background."""
        if self.client is None:
            await self.open()
        self._connecting = asyncio.create_task(self._connect(), name="socket-mode-connect")
        await asyncio.wait({self._connecting}, timeout=self.config.open_timeout_s)
        if not self._connecting.done():
            log.warning("Socket Mode: not connected yet; still trying", extra=about(None, None))

    async def stop(self) -> None:
        """Stop taking envelopes (new ones stay unacked, so Slack redelivers them), let those in
        flight settle and ack, then close the websocket."""
        self._stopping = True
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=self.config.drain_timeout_s)
        await self.close()

    async def close(self) -> None:
        """Close the websocket and the client's tasks; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connecting
        if self.client is not None:
            try:
                await self.client.close()
            except Exception as exc:  # closing a broken websocket: nothing left to save
                log.warning(
                    "Socket Mode: error while closing", extra=about(None, None, error=type(exc).__name__)
                )

    # --- listeners ------------------------------------------------------------------------------

    async def on_request(self, client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        """Every envelope slack_sdk parsed: settle it through `accept_slack`, ack once settled."""
        if self._stopping:
            return  # left unacked: Slack redelivers it to a live connection
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            await self._handle(client, request)
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def on_frame(
        self, client: AsyncBaseSocketModeClient, message: dict[str, Any], _raw: str | None
    ) -> None:
        """Every frame but `disconnect`, before slack_sdk makes a request of it: count connections, and
        ack (as rejected) an envelope slack_sdk cannot turn into a request (a payload that is not an
        object, or a missing field), which it would otherwise leave unacked for Slack to resend."""
        kind = message.get("type")
        if kind == "hello":
            self.metrics.socket_connections.inc()
            log.info(
                "Socket Mode connected",
                extra=about(None, None, num_connections=message.get("num_connections")),
            )
            return
        envelope_id = message.get("envelope_id")
        if not envelope_id or self._stopping:
            return
        usable = isinstance(kind, str) and isinstance(message.get("payload"), (dict, str))
        if not usable:
            shape = type(message.get("payload")).__name__ if "payload" in message else "missing"
            self.metrics.rejections.labels(ENDPOINT, "bad_envelope").inc()
            self.metrics.socket_envelopes.labels(_label(kind), "rejected").inc()
            log.info(
                "rejected",
                extra=about(None, None, endpoint=ENDPOINT, reason="bad_envelope", payload=shape),
            )
            await self._ack(client, str(envelope_id))

    async def on_raw(self, message: aiohttp.WSMessage) -> None:
        """Every text frame as received. slack_sdk acts on a `disconnect` frame (it reconnects) before
        any other listener sees it, so disconnects are counted here; `link_disabled` means Socket Mode
        was switched off in the app's settings, which no reconnect fixes."""
        data = message.data
        if not isinstance(data, str) or '"disconnect"' not in data:
            return
        try:
            frame = json.loads(data)
        except ValueError:
            return
        if not isinstance(frame, dict) or frame.get("type") != "disconnect":
            return
        reason = str(frame.get("reason"))[:64]
        self.metrics.socket_disconnects.labels(closed(reason, DISCONNECT_REASONS)).inc()
        level = logging.ERROR if reason == "link_disabled" else logging.INFO
        log.log(
            level, "Socket Mode disconnect from Slack; reconnecting", extra=about(None, None, reason=reason)
        )

    async def _handle(self, client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        if request.type != "events_api":
            self.metrics.socket_envelopes.labels(_label(request.type), "not_handled").inc()
            await self._ack(client, request.envelope_id)
            return
        retry = str(request.retry_attempt) if request.retry_attempt else None
        try:
            outcome = await self.ingest.accept_slack(request.payload, ENDPOINT, retry)
        except Exception:  # a bug, not bad input: unacked, like a 500, so Slack retries and then gives up
            self.metrics.socket_envelopes.labels("events_api", "error").inc()
            log.exception(
                "Socket Mode envelope failed", extra=about(None, None, envelope_id=request.envelope_id)
            )
            return
        self.metrics.socket_envelopes.labels("events_api", outcome.kind).inc()
        if outcome.settled:
            await self._ack(client, request.envelope_id)
        else:
            log.warning(
                "Socket Mode envelope not acked: the broker did not ack; Slack will redeliver it",
                extra=about(None, None, envelope_id=request.envelope_id, retry_attempt=request.retry_attempt),
            )

    async def _ack(self, client: AsyncBaseSocketModeClient, envelope_id: str) -> None:
        try:
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
        except Exception as exc:  # the websocket went away: Slack redelivers, the dedupe drops the copy
            log.warning(
                "Socket Mode ack not sent; Slack will redeliver",
                extra=about(None, None, envelope_id=envelope_id, error=type(exc).__name__),
            )

    # --- connecting -----------------------------------------------------------------------------

    async def _connect(self) -> None:
        """Open the first websocket. slack_sdk's `connect` retries a failed URL forever, so each
        attempt is bounded and the next one asks for a fresh URL. Later reconnects (disconnect frames,
        dropped or stale sockets) are slack_sdk's own."""
        client = self.client
        assert client is not None
        while not self._closed:
            try:
                client.wss_uri = self._url or await self._new_url(client.web_client, at_start=False)
                self._url = None
                await asyncio.wait_for(client.connect(), self.config.open_timeout_s)
                return
            except UserFacingError as exc:
                log.error(
                    "Socket Mode: cannot get a websocket URL; retrying",
                    extra=about(None, None, error=str(exc)),
                )
            except TimeoutError:
                log.warning("Socket Mode: the websocket did not open in time; retrying with a new URL")
            await asyncio.sleep(self.config.ping_interval_s)

    async def _new_url(self, web: AsyncWebClient, at_start: bool) -> str:
        """apps.connections.open with the app token (sent as a header; never logged by us)."""
        api = api_base_url(self.config.api_url)
        for attempt in range(3):
            try:
                response = await asyncio.wait_for(
                    web.apps_connections_open(app_token=self.config.app_token),
                    self.config.open_timeout_s,
                )
            except SlackApiError as exc:
                error = _api_error(exc)
                if error == "ratelimited" and attempt < 2:
                    await asyncio.sleep(_retry_after(exc))
                    continue
                raise UserFacingError(_token_problem(error, api)) from None
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                detail = str(exc).splitlines()[0] if str(exc) else ""
                raise UserFacingError(
                    f"Slack's Web API at {api} (SLACK_API_URL) did not answer apps.connections.open "
                    f"for SLACK_APP_TOKEN: {type(exc).__name__}{': ' + detail if detail else ''}"
                ) from None
            url = response.get("url")
            if not isinstance(url, str) or not url.startswith(("wss://", "ws://")):
                raise UserFacingError(
                    f"apps.connections.open at {api} (SLACK_API_URL) gave no websocket URL for SLACK_APP_TOKEN"
                )
            if not at_start:
                log.info("Socket Mode: new websocket URL issued", extra=about(None, None))
            return url
        raise UserFacingError(f"apps.connections.open at {api} stayed rate limited for SLACK_APP_TOKEN")

    def _connected(self) -> float:
        client = self.client
        if client is None or client.closed:
            return 0.0
        session = client.current_session
        return 1.0 if session is not None and not session.closed else 0.0


def _label(kind: Any) -> str:
    return closed(kind, ENVELOPE_TYPES)


def _api_error(exc: SlackApiError) -> str:
    response = exc.response
    data = getattr(response, "data", None)  # not a dict when the answer was not JSON (a wrong URL)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, str) and error:
        return error[:80]
    return f"HTTP {getattr(response, 'status_code', '?')}"


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", {}) or {}
    try:
        return min(30.0, max(1.0, float(headers.get("Retry-After", "1"))))
    except (TypeError, ValueError):
        return 1.0


def _token_problem(error: str, api: str) -> str:
    known = TOKEN_ERRORS.get(error)
    if known is not None:
        return f"SLACK_APP_TOKEN {known}"
    return f"SLACK_APP_TOKEN: apps.connections.open at {api} (SLACK_API_URL) failed: {error[:80]}"
