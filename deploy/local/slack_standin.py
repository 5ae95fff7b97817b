"""A Slack stand-in on loopback: Slack's Web API and Socket Mode wire format, for tests and the demo.

No real Slack is reachable from here, and a mock that answers `ok` to anything lets code pass that real
Slack rejects. This server speaks what slack_sdk 3.48 sends and reads (JSON bodies for chat.postMessage,
form bodies or query strings elsewhere, `Authorization: Bearer`), and enforces the rules the bot relies
on: token kinds and revocation, known channels and threads, metadata returned only on request, forced
429s with `Retry-After`, Socket Mode acks with redelivery, and disconnect/reconnect. Point the official
client at it unchanged: `AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)`.

A development tool only: nothing under `services/` may import it.

- Python: `with running(channels=["C0INCIDENTS"]) as slack: ...` (a uvicorn thread on a free port).
- CLI (the demo): `python -m deploy.local.slack_standin --port 3333 --channel C0INCIDENTS` prints the
  Web API base URL on stdout's first line, then serves until interrupted.
- Control endpoints (not Slack's API) live under `/_standin/`; see `_Http.routes`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import dataclasses
import json
import re
import secrets
import string
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from deploy.local import asgi_thread

Json = dict[str, Any]
T = TypeVar("T")

DEFAULT_BOT_TOKEN = "xoxb-0000000001-standin-bot-token"
DEFAULT_APP_TOKEN = "xapp-1-A0BOTMEM1-standin-app-token"
DEFAULT_CHANNEL = "C0INCIDENTS"
HUMAN_USER = "U0HUMAN01"

EVENT_TYPE = re.compile(r"[A-Za-z0-9_-]+")  # Slack: letters, digits, `_` and `-`; anything else is dropped
TS = re.compile(r"\d+\.\d+")
MAX_TEXT = 40_000
MAX_BLOCKS = 50
MAX_ATTACHMENTS = 100
REPLIES_LIMIT = (1000, 1000)  # (default, max) as Slack documents them
HISTORY_LIMIT = (100, 999)
BLOCK_TYPES = frozenset(
    {"actions", "context", "divider", "file", "header", "image", "input", "markdown", "rich_text", "section"}
    | {"table", "video", "context_actions", "call"}
)
APPLINK_HOST = "applink-standin-1"
MESSAGE_EVENT_KEYS: tuple[str, ...] = ("user", "text", "ts", "thread_ts", "parent_user_id", "client_msg_id")
MESSAGE_EVENT_KEYS += ("team", "blocks", "bot_id", "app_id", "subtype")
JSON_TYPE = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Workspace:
    """Who the bot is: what auth.test, hello frames and every bot message report."""

    team_id: str = "T0STANDIN"
    team: str = "Incident Memory (stand-in)"
    url: str = "https://incident-memory-standin.slack.com/"
    bot_user_id: str = "U0BOTMEM1"
    bot_user_name: str = "incident-memory"
    bot_id: str = "B0BOTMEM1"
    app_id: str = "A0BOTMEM1"


@dataclass(frozen=True)
class ApiCall:
    """One Web API call as received, so tests can assert what a client sent and how often it retried."""

    method: str
    http_method: str
    content_type: str
    token: str | None
    args: Json
    status: int
    error: str | None


@dataclass
class Envelope:
    """One Socket Mode envelope and its delivery history (`deliveries` holds each send's retry_attempt)."""

    envelope_id: str
    type: str
    payload: Json
    deliveries: list[int] = field(default_factory=list)
    acked: bool = False
    given_up: bool = False

    def frame(self, attempt: int) -> Json:
        """The frame as Slack sends it; only events_api envelopes carry retry fields."""
        frame: Json = {
            "envelope_id": self.envelope_id,
            "type": self.type,
            "payload": self.payload,
            "accepts_response_payload": self.type == "slash_commands",
        }
        if self.type == "events_api":
            frame.update(retry_attempt=attempt, retry_reason="timeout" if attempt else "")
        return frame


@dataclass(frozen=True)
class Ack:
    """An ack frame a client sent (any `{"envelope_id": ...}`), kept even for unknown or repeated ids."""

    envelope_id: str
    payload: Json | None
    connection: int


class ApiError(Exception):
    """An `ok: false` answer; Slack sends these with HTTP 200."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra

    def body(self) -> Json:
        return {"ok": False, "error": self.error, **self.extra}


# --- argument parsing: form values arrive as strings, JSON values typed ------------------------------


def as_bool(value: Any) -> bool:
    """Slack's booleans: JSON true/false, or "true"/"1" (slack_sdk sends "1"/"0" in forms and queries)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true")
    return bool(value)


def as_limit(value: Any, default: int, most: int) -> int:
    try:
        limit = int(value)
    except (TypeError, ValueError):
        return default
    return default if limit <= 0 else min(limit, most)


def decode_json_field(value: Any, error: str) -> Any:
    """Form bodies carry blocks and metadata as JSON strings; JSON bodies carry them as values."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ApiError(error) from None


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def encode_cursor(ts: str) -> str:
    """Slack's cursors are base64 of `next_ts:<ts>`; clients must treat them as opaque."""
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def cursor_start(cursor: Any, messages: list[Json]) -> int:
    """The index a cursor points at; an unknown or malformed cursor is `invalid_cursor`, as in Slack."""
    if not cursor:
        return 0
    try:
        prefix, _, ts = base64.b64decode(str(cursor), validate=True).decode().partition(":")
    except ValueError:
        raise ApiError("invalid_cursor") from None
    for index, message in enumerate(messages):
        if prefix == "next_ts" and message["ts"] == ts:
            return index
    raise ApiError("invalid_cursor")


def page(messages: list[Json], args: Json, limits: tuple[int, int]) -> Json:
    """One page of a cursor-paginated answer (`has_more` + `response_metadata.next_cursor`)."""
    start = cursor_start(args.get("cursor"), messages)
    end = start + as_limit(args.get("limit"), *limits)
    body: Json = {"ok": True, "messages": messages[start:end], "has_more": end < len(messages)}
    if end < len(messages):
        body["response_metadata"] = {"next_cursor": encode_cursor(messages[end]["ts"])}
    return body


def within(messages: list[Json], args: Json) -> list[Json]:
    """Slack's `oldest`/`latest`/`inclusive` window over message timestamps."""
    oldest, latest = float(args.get("oldest") or 0), float(args.get("latest") or "inf")
    inclusive = as_bool(args.get("inclusive"))

    def keep(ts: float) -> bool:
        return oldest <= ts <= latest if inclusive else oldest < ts < latest

    return [m for m in messages if keep(float(m["ts"]))]


# --- Block Kit and metadata: what Slack rejects outright, and what it silently drops ----------------


def text_problems(obj: Any, pointer: str, most: int, kinds: tuple[str, ...]) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in kinds or not isinstance(obj.get("text"), str):
        return [f"must be a text object of type {'/'.join(kinds)} [json-pointer:{pointer}]"]
    if not obj["text"] or len(obj["text"]) > most:
        return [f"must be 1-{most} characters [json-pointer:{pointer}/text]"]
    return []


def section_problems(block: Json, pointer: str) -> list[str]:
    if "text" not in block and "fields" not in block:
        return [f"must provide either text or fields [json-pointer:{pointer}]"]
    problems = (
        text_problems(block["text"], f"{pointer}/text", 3000, ("plain_text", "mrkdwn"))
        if "text" in block
        else []
    )
    fields = block.get("fields", [])
    if not isinstance(fields, list) or len(fields) > 10:
        return [*problems, f"no more than 10 items allowed [json-pointer:{pointer}/fields]"]
    for i, item in enumerate(fields):
        problems += text_problems(item, f"{pointer}/fields/{i}", 2000, ("plain_text", "mrkdwn"))
    return problems


def header_problems(block: Json, pointer: str) -> list[str]:
    return text_problems(block.get("text"), f"{pointer}/text", 150, ("plain_text",))


def context_problems(block: Json, pointer: str) -> list[str]:
    elements = block.get("elements")
    if not isinstance(elements, list) or not 1 <= len(elements) <= 10:
        return [f"must hold 1-10 elements [json-pointer:{pointer}/elements]"]
    return []


BLOCK_CHECKS: dict[str, Callable[[Json, str], list[str]]] = {
    "section": section_problems,
    "header": header_problems,
    "context": context_problems,
}


def block_problems(block: Any, pointer: str, seen_ids: set[str]) -> list[str]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return [f"missing required field: type [json-pointer:{pointer}]"]
    if block["type"] not in BLOCK_TYPES:
        return [f"unsupported type: {block['type']} [json-pointer:{pointer}/type]"]
    problems: list[str] = []
    block_id = block.get("block_id")
    if block_id is not None:
        if not isinstance(block_id, str) or not 1 <= len(block_id) <= 255:
            problems.append(f"must be 1-255 characters [json-pointer:{pointer}/block_id]")
        elif block_id in seen_ids:
            problems.append(f"block_id must be unique within a message [json-pointer:{pointer}/block_id]")
        seen_ids.add(str(block_id))
    check = BLOCK_CHECKS.get(block["type"])
    return problems + (check(block, pointer) if check else [])


def random_block_id() -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(5))


def check_blocks(raw: Any) -> list[Json]:
    """Blocks as Slack stores them: invalid ones fail the whole post; missing block_ids are filled in."""
    if raw is None or raw == "":
        return []
    blocks = decode_json_field(raw, "invalid_blocks_format")
    if not isinstance(blocks, list):
        raise ApiError("invalid_blocks_format")
    problems = (
        [f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"]
        if len(blocks) > MAX_BLOCKS
        else []
    )
    seen_ids: set[str] = set()
    for i, block in enumerate(blocks):
        problems += block_problems(block, f"/blocks/{i}", seen_ids)
    if problems:
        messages = [f"[ERROR] {p}" for p in problems]
        raise ApiError("invalid_blocks", errors=problems, response_metadata={"messages": messages})
    return [{**copy.deepcopy(b), "block_id": b.get("block_id") or random_block_id()} for b in blocks]


def check_attachments(raw: Any) -> list[Json]:
    if raw is None or raw == "":
        return []
    attachments = decode_json_field(raw, "invalid_attachments")
    if not isinstance(attachments, list):
        raise ApiError("invalid_attachments")
    if len(attachments) > MAX_ATTACHMENTS:
        raise ApiError("too_many_attachments")
    return copy.deepcopy(attachments)


def check_metadata(raw: Any) -> tuple[Json | None, list[str]]:
    """(metadata to store, warnings). A malformed object is an error; a bad event_type is dropped with a
    warning while the message still posts, which is exactly how a typo goes unnoticed against real Slack."""
    if raw is None or raw == "" or raw == {}:
        return None, []
    meta = decode_json_field(raw, "invalid_metadata_format")
    if not (
        isinstance(meta, dict)
        and isinstance(meta.get("event_type"), str)
        and isinstance(meta.get("event_payload"), dict)
    ):
        raise ApiError("invalid_metadata_format")
    if not EVENT_TYPE.fullmatch(meta["event_type"]):
        return None, ["invalid_metadata_schema"]
    return {"event_type": meta["event_type"], "event_payload": copy.deepcopy(meta["event_payload"])}, []


def is_reply(message: Json) -> bool:
    """Stored parents never carry thread_ts; replies always do."""
    return "thread_ts" in message


# --- Socket Mode -------------------------------------------------------------------------------------


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class _Link:
    """One open Socket Mode websocket; sends are serialised so frames never interleave."""

    def __init__(self, number: int, ws: WebSocket) -> None:
        self.number = number
        self.ws = ws
        self._send_lock = asyncio.Lock()

    async def send(self, frame: Json) -> bool:
        async with self._send_lock:
            try:
                await self.ws.send_text(json.dumps(frame))
            except Exception:  # the peer went away mid-send: the caller tries another connection
                return False
            return True

    async def close(self, code: int = 1000) -> None:
        async with self._send_lock:
            with contextlib.suppress(Exception):
                await self.ws.close(code=code)


class SocketHub:
    """Socket Mode's server side: the app's websockets, each envelope sent to one of them until acked
    (redelivered after `ack_timeout` with retry_attempt + 1, up to `max_retries`), and disconnects."""

    def __init__(self, app_id: str, ack_timeout: float, max_retries: int, disconnect_grace: float) -> None:
        self.app_id = app_id
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.disconnect_grace = disconnect_grace
        self._lock = threading.RLock()
        self._links: dict[int, _Link] = {}
        self._opened = 0
        self._turn = 0
        self._envelopes: dict[str, Envelope] = {}
        self._acks: list[Ack] = []
        self._ack_events: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # serving lifecycle
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def detach(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for link in list(self._links.values()):
            await link.close(1001)
        self._loop = None

    # state, safe from any thread
    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._links)

    @property
    def connections_opened(self) -> int:
        with self._lock:
            return self._opened

    def acks(self) -> list[Ack]:
        with self._lock:
            return list(self._acks)

    def envelopes(self) -> list[Envelope]:
        with self._lock:
            return [dataclasses.replace(e, deliveries=list(e.deliveries)) for e in self._envelopes.values()]

    def envelope(self, envelope_id: str) -> Envelope:
        with self._lock:
            e = self._envelopes[envelope_id]
            return dataclasses.replace(e, deliveries=list(e.deliveries))

    # control
    def push(self, payload: Json, envelope_type: str = "events_api") -> str:
        """Queue an envelope; it goes out at once if a client is connected, else on the next connection."""
        if self._loop is None:
            raise RuntimeError("the Slack stand-in is not serving")
        envelope = Envelope(str(uuid.uuid4()), envelope_type, copy.deepcopy(payload))
        with self._lock:
            self._envelopes[envelope.envelope_id] = envelope
        self._spawn(self._deliver(envelope))
        return envelope.envelope_id

    def disconnect(self, reason: str | None = "refresh_requested", close_after: float | None = None) -> int:
        """Thread-safe `disconnect_async`; returns how many connections were told."""
        return self._run(self.disconnect_async(reason, close_after))

    async def disconnect_async(
        self, reason: str | None = "refresh_requested", close_after: float | None = None
    ) -> int:
        """Send `{"type": "disconnect", "reason": ...}` to every connection and close each after
        `close_after` seconds (Slack closes shortly after; slack_sdk reconnects on the frame itself).
        `reason=None` drops the connections at once without a frame, like a network failure."""
        with self._lock:
            links = list(self._links.values())
        if reason is None:
            await asyncio.gather(*(link.close(1011) for link in links))
            return len(links)
        frame = {
            "type": "disconnect",
            "reason": reason,
            "debug_info": {"host": APPLINK_HOST},
            "connection_info": {"app_id": self.app_id},
        }
        for link in links:
            await link.send(frame)
        delay = self.disconnect_grace if close_after is None else close_after
        for link in links:
            self._spawn(self._close_later(link, delay))
        return len(links)

    # the websocket endpoint
    async def serve(self, ws: WebSocket, ticket_ok: bool) -> None:
        if not ticket_ok:  # closing before accept answers the handshake with HTTP 403
            await ws.close(code=1008)
            return
        await ws.accept()
        link = self._open(ws)
        try:
            await link.send(self._hello())
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                if message.get("text"):
                    self._on_frame(link, message["text"])
        finally:
            with self._lock:
                self._links.pop(link.number, None)

    def _open(self, ws: WebSocket) -> _Link:
        with self._lock:
            self._opened += 1
            link = _Link(self._opened, ws)
            self._links[link.number] = link
            return link

    def _hello(self) -> Json:
        return {
            "type": "hello",
            "num_connections": self.open_connections,
            "debug_info": {"host": APPLINK_HOST, "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.app_id},
        }

    def _on_frame(self, link: _Link, text: str) -> None:
        try:
            frame = json.loads(text)
        except ValueError:
            return
        if not isinstance(frame, dict) or "envelope_id" not in frame:
            return
        envelope_id = str(frame["envelope_id"])
        with self._lock:
            self._acks.append(Ack(envelope_id, frame.get("payload"), link.number))
            if envelope_id in self._envelopes:
                self._envelopes[envelope_id].acked = True
        event = self._ack_events.get(envelope_id)
        if event is not None:
            event.set()

    async def _deliver(self, envelope: Envelope) -> None:
        acked = self._ack_events.setdefault(envelope.envelope_id, asyncio.Event())
        try:
            attempt = 0
            while True:
                await self._send_to_one(envelope.frame(attempt))
                with self._lock:
                    envelope.deliveries.append(attempt)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(acked.wait(), self.ack_timeout)
                if acked.is_set() or attempt >= self.max_retries:
                    with self._lock:
                        envelope.given_up = not acked.is_set()
                    return
                attempt += 1
        finally:
            self._ack_events.pop(envelope.envelope_id, None)

    async def _send_to_one(self, frame: Json) -> None:
        """Slack hands each envelope to one of the app's connections: round-robin, waiting for one."""
        while True:
            with self._lock:
                links = sorted(self._links.values(), key=lambda link: link.number)
                link = links[self._turn % len(links)] if links else None
                self._turn += 1
            if link is not None and await link.send(frame):
                return
            await asyncio.sleep(0.02)

    async def _close_later(self, link: _Link, delay: float) -> None:
        await asyncio.sleep(delay)
        await link.close()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("the Slack stand-in is not serving")

        def start() -> None:
            task = loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        if _on_loop(loop):
            start()
        else:
            loop.call_soon_threadsafe(start)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None or _on_loop(loop):
            coro.close()
            raise RuntimeError("not serving, or called on the server's loop: use the async variant")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=10)


# --- the stand-in ------------------------------------------------------------------------------------


class SlackStandin:
    """Slack's state and rules for one workspace with one app: tokens, channels, messages, forced rate
    limits, the call log, and (via `hub`) Socket Mode. Accessors return copies and are thread-safe, so
    tests can check state directly while the server runs in its own thread."""

    def __init__(
        self,
        *,
        bot_tokens: Iterable[str] = (DEFAULT_BOT_TOKEN,),
        app_tokens: Iterable[str] = (DEFAULT_APP_TOKEN,),
        channels: Iterable[str] = (DEFAULT_CHANNEL,),
        private_channels: Iterable[str] = (),
        workspace: Workspace | None = None,
        ack_timeout: float = 3.0,
        max_retries: int = 3,
        disconnect_grace: float = 1.0,
    ) -> None:
        self.workspace = workspace or Workspace()
        self._bot_tokens = self._tokens(bot_tokens, "xoxb-")
        self._app_tokens = self._tokens(app_tokens, "xapp-")
        self._lock = threading.RLock()
        self._revoked: dict[str, str] = {}
        self._private = frozenset(private_channels)
        self._channels: dict[str, list[Json]] = {
            channel: [] for channel in (*channels, *sorted(self._private))
        }
        self._last_ts_us = 0
        self._rate_limits: dict[str, list[int]] = {}
        self._holds: dict[str, float] = {}
        self._calls: list[ApiCall] = []
        self._tickets: set[str] = set()
        self.hub = SocketHub(self.workspace.app_id, ack_timeout, max_retries, disconnect_grace)
        self.url = ""  # http://host:port once served

    @staticmethod
    def _tokens(tokens: Iterable[str], prefix: str) -> list[str]:
        listed = list(tokens)
        if not listed or any(not t.startswith(prefix) for t in listed):
            raise ValueError(f"tokens must be given and start with {prefix!r}: {listed}")
        return listed

    # addresses and credentials
    @property
    def base_url(self) -> str:
        """What slack_sdk's `base_url` takes (it joins method names onto it, so the slash matters)."""
        return f"{self.url}/api/"

    @property
    def bot_token(self) -> str:
        return self._bot_tokens[0]

    @property
    def app_token(self) -> str:
        return self._app_tokens[0]

    @property
    def channels(self) -> list[str]:
        return list(self._channels)

    # state accessors
    def messages(self, channel: str) -> list[Json]:
        """Every message of a channel, top-level and replies, in posting order, with metadata and blocks."""
        with self._lock:
            return copy.deepcopy(self._channels[channel])

    def thread(self, channel: str, thread_ts: str) -> list[Json]:
        """A thread's parent then its replies (stored form, metadata included)."""
        with self._lock:
            parent = self._find(channel, thread_ts)
            return copy.deepcopy([parent, *self._replies_of(channel, thread_ts)]) if parent else []

    def calls(self, method: str | None = None) -> list[ApiCall]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    # Socket Mode, delegated so callers need one object
    def push_event(self, payload: Json, envelope_type: str = "events_api") -> str:
        """Deliver an Events API body (e.g. `event_callback(...)`) over Socket Mode; returns envelope_id."""
        return self.hub.push(payload, envelope_type)

    def acks(self) -> list[str]:
        """Envelope ids the clients acked, in order (repeats and unknown ids kept)."""
        return [ack.envelope_id for ack in self.hub.acks()]

    def envelope(self, envelope_id: str) -> Envelope:
        return self.hub.envelope(envelope_id)

    def disconnect(self, reason: str | None = "refresh_requested", close_after: float | None = None) -> int:
        return self.hub.disconnect(reason, close_after)

    # control
    def rate_limit(self, method: str, count: int, retry_after: int = 1) -> None:
        """Answer the next `count` calls of `method` with HTTP 429 and `Retry-After: retry_after`."""
        with self._lock:
            self._rate_limits[method] = [count, retry_after]

    def revoke(self, token: str, error: str = "token_revoked") -> None:
        """Make a token fail every call; Slack says `token_revoked` for uninstalled apps and revoked
        tokens (pass error="invalid_auth" to model a token that never existed)."""
        with self._lock:
            self._revoked[token] = error

    def post_as_user(
        self, channel: str, text: str, user: str = HUMAN_USER, thread_ts: str | None = None
    ) -> Json:
        """Store a human's message (no HTTP, no events), e.g. an answer in a thread the bot will read."""
        with self._lock:
            self._check_channel(channel)
            parent = self._thread_parent(channel, thread_ts)
            return copy.deepcopy(self._store(channel, {"text": text, "user": user}, parent))

    def message_event(self, channel: str, message: Json) -> Json:
        """The `message` event Slack sends for a stored message (feed it to `event_callback`)."""
        event = {"type": "message", **{k: message[k] for k in MESSAGE_EVENT_KEYS if k in message}}
        return {**event, "channel": channel, "event_ts": message["ts"], "channel_type": "channel"}

    def event_callback(self, event: Json) -> Json:
        """The Events API outer body Slack wraps every event in."""
        ws = self.workspace
        return {
            "token": "standin-verification-token",
            "team_id": ws.team_id,
            "api_app_id": ws.app_id,
            "event": copy.deepcopy(event),
            "type": "event_callback",
            "event_id": "Ev" + uuid.uuid4().hex[:10].upper(),
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": ws.team_id,
                    "user_id": ws.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": "4-" + base64.b64encode(json.dumps({"tid": ws.team_id}).encode()).decode(),
        }

    # the Web API
    def call(self, method: str, args: Json, token: str | None) -> Json:
        """Answer one Web API call without HTTP; raises ApiError for `ok: false` answers."""
        handlers: dict[str, tuple[str, Callable[[Json], Json]]] = {
            "auth.test": ("bot", self._auth_test),
            "chat.postMessage": ("bot", self._post_message),
            "conversations.replies": ("bot", self._conversations_replies),
            "conversations.history": ("bot", self._conversations_history),
            "conversations.info": ("bot", self._conversations_info),
            "apps.connections.open": ("app", self._connections_open),
        }
        if method not in handlers:
            raise ApiError("unknown_method", req_method=method)
        kind, handler = handlers[method]
        self._authorize(token, kind)
        return handler(args)

    def hold(self, method: str, seconds: float) -> None:
        """Answer every later call of `method` only `seconds` after doing it (0: stop holding): a
        caller killed in between has had its call done, but never saw the answer."""
        with self._lock:
            if seconds > 0:
                self._holds[method] = seconds
            else:
                self._holds.pop(method, None)

    def held(self, method: str) -> float:
        with self._lock:
            return self._holds.get(method, 0.0)

    def take_rate_limit(self, method: str) -> int | None:
        """The Retry-After to answer with if this call is to be rate limited, else None."""
        with self._lock:
            left = self._rate_limits.get(method)
            if not left or left[0] <= 0:
                return None
            left[0] -= 1
            return left[1]

    def record(self, call: ApiCall) -> None:
        with self._lock:
            self._calls.append(call)

    def ticket_ok(self, ticket: str | None) -> bool:
        with self._lock:
            return ticket in self._tickets

    def _authorize(self, token: str | None, kind: str) -> None:
        """Bot methods need a bot token, apps.connections.open an app-level token, as in Slack."""
        if not token:
            raise ApiError("not_authed")
        with self._lock:
            if token in self._revoked:
                raise ApiError(self._revoked[token])
        if token not in self._bot_tokens and token not in self._app_tokens:
            raise ApiError("invalid_auth")
        if (token in self._bot_tokens) != (kind == "bot"):
            raise ApiError("not_allowed_token_type")

    def _auth_test(self, _args: Json) -> Json:
        ws = self.workspace
        return {
            "ok": True,
            "url": ws.url,
            "team": ws.team,
            "user": ws.bot_user_name,
            "team_id": ws.team_id,
            "user_id": ws.bot_user_id,
            "bot_id": ws.bot_id,
            "is_enterprise_install": False,
        }

    def _post_message(self, args: Json) -> Json:
        channel = self._check_channel(args.get("channel"))
        text = "" if args.get("text") is None else str(args["text"])
        blocks, attachments = check_blocks(args.get("blocks")), check_attachments(args.get("attachments"))
        if not text and not blocks and not attachments:
            raise ApiError("no_text")
        if len(text) > MAX_TEXT:
            raise ApiError("msg_too_long")
        metadata, warnings = check_metadata(args.get("metadata"))
        fields: Json = {"text": text, **self._bot_fields()}
        fields.update({k: v for k, v in (("blocks", blocks), ("attachments", attachments)) if v})
        if metadata:
            fields["metadata"] = metadata
        with self._lock:
            parent = self._thread_parent(channel, args.get("thread_ts"))
            if parent and as_bool(args.get("reply_broadcast")):
                fields["subtype"] = "thread_broadcast"
            message = self._store(channel, fields, parent)
            body: Json = {
                "ok": True,
                "channel": channel,
                "ts": message["ts"],
                "message": copy.deepcopy(message),
            }
        if warnings:
            body.update(warning=",".join(warnings), response_metadata={"warnings": warnings})
        return body

    def _conversations_replies(self, args: Json) -> Json:
        channel = self._check_channel(args.get("channel"))
        if not args.get("ts"):
            raise ApiError(
                "invalid_arguments", response_metadata={"messages": ["[ERROR] missing required field: ts"]}
            )
        include = as_bool(args.get("include_all_metadata"))
        with self._lock:
            found = self._find(channel, str(args["ts"]))
            if found is None:
                raise ApiError("thread_not_found")
            parent = self._find(channel, found["thread_ts"]) if is_reply(found) else found
            assert parent is not None
            replies = within(self._replies_of(channel, parent["ts"]), args)
            thread = [self._render(channel, m, include) for m in (parent, *replies)]
        return page(thread, args, REPLIES_LIMIT)

    def _conversations_history(self, args: Json) -> Json:
        channel = self._check_channel(args.get("channel"))
        include = as_bool(args.get("include_all_metadata"))
        with self._lock:
            shown = [
                m
                for m in self._channels[channel]
                if not is_reply(m) or m.get("subtype") == "thread_broadcast"
            ]
            newest_first = [self._render(channel, m, include) for m in reversed(within(shown, args))]
        return page(newest_first, args, HISTORY_LIMIT)

    def _conversations_info(self, args: Json) -> Json:
        """A channel's conversation object, as Slack's `conversations.info` answers for a channel the bot is
        in (`is_private` true for a private channel; `is_group` only for the legacy private groups)."""
        channel = self._check_channel(args.get("channel"))
        private = channel in self._private
        return {
            "ok": True,
            "channel": {
                "id": channel,
                "name": channel.lower(),
                "is_channel": True,
                "is_group": False,
                "is_im": False,
                "is_mpim": False,
                "is_private": private,
                "created": 1700000000,
                "is_archived": False,
                "is_general": False,
                "unlinked": 0,
                "name_normalized": channel.lower(),
                "is_shared": False,
                "is_org_shared": False,
                "is_pending_ext_shared": False,
                "pending_shared": [],
                "context_team_id": self.workspace.team_id,
                "is_ext_shared": False,
                "is_member": True,
                "creator": "U0CREATOR",
                "topic": {"value": "", "creator": "", "last_set": 0},
                "purpose": {"value": "", "creator": "", "last_set": 0},
                "previous_names": [],
            },
        }

    def _connections_open(self, _args: Json) -> Json:
        ticket = uuid.uuid4().hex
        with self._lock:
            self._tickets.add(ticket)
        ws_base = "ws" + self.url.removeprefix("http")
        return {"ok": True, "url": f"{ws_base}/link/?ticket={ticket}&app_id={self.workspace.app_id}"}

    # messages
    def _check_channel(self, channel: Any) -> str:
        if not isinstance(channel, str) or channel not in self._channels:
            raise ApiError("channel_not_found")
        return channel

    def _find(self, channel: str, ts: str) -> Json | None:
        return next((m for m in self._channels[channel] if m["ts"] == ts), None)

    def _replies_of(self, channel: str, parent_ts: str) -> list[Json]:
        return [m for m in self._channels[channel] if m.get("thread_ts") == parent_ts]

    def _thread_parent(self, channel: str, thread_ts: Any) -> Json | None:
        """The parent a reply goes under. A reply's ts resolves to its parent, as Slack threads only one
        level deep; a well-formed ts the stand-in does not hold fails `thread_not_found` (real Slack may
        accept it and orphan the reply, which is a bug worth catching here)."""
        if thread_ts is None or thread_ts == "":
            return None
        ts = str(thread_ts)
        if not TS.fullmatch(ts):
            raise ApiError(
                "invalid_thread_ts",
                response_metadata={"messages": [f"[ERROR] {ts} is not a valid thread_ts"]},
            )
        found = self._find(channel, ts)
        if found is None:
            raise ApiError("thread_not_found")
        return self._find(channel, found["thread_ts"]) if is_reply(found) else found

    def _next_ts(self) -> str:
        """Fresh, strictly increasing `%d.%06d` timestamps (unique across channels, so within each)."""
        self._last_ts_us = max(time.time_ns() // 1000, self._last_ts_us + 1)
        seconds, micros = divmod(self._last_ts_us, 1_000_000)
        return f"{seconds}.{micros:06d}"

    def _store(self, channel: str, fields: Json, parent: Json | None) -> Json:
        message: Json = {"type": "message", **fields, "ts": self._next_ts(), "team": self.workspace.team_id}
        if "bot_id" not in message:
            message["client_msg_id"] = str(uuid.uuid4())
        if parent is not None:
            message.update(thread_ts=parent["ts"], parent_user_id=parent["user"])
        self._channels[channel].append(message)
        return message

    def _bot_fields(self) -> Json:
        ws = self.workspace
        profile = {"id": ws.bot_id, "app_id": ws.app_id, "name": ws.bot_user_name, "deleted": False}
        return {"user": ws.bot_user_id, "bot_id": ws.bot_id, "app_id": ws.app_id, "bot_profile": profile}

    def _render(self, channel: str, message: Json, include_metadata: bool) -> Json:
        """A message as conversations.* return it: metadata only on request, thread summary on parents."""
        out = copy.deepcopy(message)
        if not include_metadata:
            out.pop("metadata", None)
        replies = [] if is_reply(message) else self._replies_of(channel, message["ts"])
        if replies:
            users = list(dict.fromkeys(r["user"] for r in replies))
            out.update(
                thread_ts=message["ts"],
                reply_count=len(replies),
                reply_users=users,
                reply_users_count=len(users),
                latest_reply=replies[-1]["ts"],
            )
        return out


# --- HTTP --------------------------------------------------------------------------------------------


def _json(body: Json, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(body, status_code=status, headers=headers, media_type=JSON_TYPE)


async def read_args(request: Request) -> tuple[Json, str | None]:
    """(arguments, token) the way Slack reads them: query string plus a JSON or form body. The token comes
    from `Authorization: Bearer` or a form field; Slack ignores a token inside a JSON body or a query."""
    args: Json = dict(request.query_params)
    args.pop("token", None)
    token = bearer_token(request.headers.get("authorization"))
    raw = await request.body()
    mime = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if raw and mime == "application/json":
        try:
            body = json.loads(raw)
        except ValueError:
            raise ApiError("invalid_json") from None
        if not isinstance(body, dict):
            raise ApiError("invalid_json")
        body.pop("token", None)
        args.update(body)
    elif raw and mime == "application/x-www-form-urlencoded":
        args.update(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    elif raw and mime == "multipart/form-data":
        try:
            form = await request.form()
        except Exception:
            raise ApiError("invalid_form_data") from None
        args.update({k: v for k, v in form.items() if isinstance(v, str)})
    elif raw:
        raise ApiError("invalid_post_type" if mime else "missing_post_type")
    form_token = args.pop("token", None) if mime != "application/json" else None
    return args, token or (str(form_token) if form_token else None)


class _Http:
    """Starlette endpoints: Slack's `/api/<method>` and `/link/` websocket, and the `/_standin/` controls."""

    def __init__(self, standin: SlackStandin) -> None:
        self.slack = standin

    def routes(self) -> list[BaseRoute]:
        control: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
            ("/_standin/health", self.health, "GET"),
            ("/_standin/ratelimit", self.ratelimit, "POST"),  # {"method", "count", "retry_after"}
            ("/_standin/hold", self.hold, "POST"),  # {"method", "seconds"}: answer only that much later
            ("/_standin/messages", self.list_messages, "GET"),  # ?channel=C...
            ("/_standin/messages", self.post_human, "POST"),  # {"channel", "text", "user"?, "thread_ts"?}
            ("/_standin/events", self.push_event, "POST"),  # body: the Events API payload; ?type=events_api
            ("/_standin/acks", self.list_acks, "GET"),
            ("/_standin/disconnect", self.disconnect, "POST"),  # {"reason"?: "refresh_requested"}
            ("/_standin/revoke", self.revoke, "POST"),  # {"token", "error"?: "token_revoked"}
            ("/_standin/calls", self.list_calls, "GET"),  # ?method=chat.postMessage
        ]
        return [
            Route("/api/{method}", self.api, methods=["GET", "POST"]),
            WebSocketRoute("/link", self.link),
            WebSocketRoute("/link/", self.link),
            *(Route(path, endpoint, methods=[verb]) for path, endpoint, verb in control),
        ]

    async def api(self, request: Request) -> Response:
        method = request.path_params["method"]
        args: Json = {}
        token: str | None = None
        status, headers = 200, None
        try:
            args, token = await read_args(request)
            retry_after = self.slack.take_rate_limit(method)
            if retry_after is not None:
                status, headers = 429, {"Retry-After": str(retry_after)}
                body: Json = {"ok": False, "error": "ratelimited"}
            else:
                body = self.slack.call(method, args, token)
        except ApiError as exc:
            body = exc.body()
        ctype = request.headers.get("content-type", "")
        self.slack.record(ApiCall(method, request.method, ctype, token, args, status, body.get("error")))
        if (delay := self.slack.held(method)) > 0:
            await asyncio.sleep(delay)
        return _json(body, status, headers)

    async def link(self, ws: WebSocket) -> None:
        await self.slack.hub.serve(ws, self.slack.ticket_ok(ws.query_params.get("ticket")))

    async def _control(self, request: Request, action: Callable[[Json], Awaitable[Json]]) -> Response:
        """Run a control action on the JSON body (or query); bad input is HTTP 400, not a Slack error."""
        try:
            raw = await request.body()
            body = json.loads(raw) if raw else dict(request.query_params)
            return _json({"ok": True, **await action(body)})
        except (KeyError, TypeError, ValueError, ApiError) as exc:
            return _json({"ok": False, "error": f"bad_request: {exc!r}"}, 400)

    async def health(self, request: Request) -> Response:
        return _json({"ok": True, "base_url": self.slack.base_url})

    async def hold(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            self.slack.hold(str(body["method"]), float(body.get("seconds", 0)))
            return {}

        return await self._control(request, act)

    async def ratelimit(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            self.slack.rate_limit(
                str(body["method"]), int(body.get("count", 1)), int(body.get("retry_after", 1))
            )
            return {}

        return await self._control(request, act)

    async def list_messages(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            return {"messages": self.slack.messages(str(body["channel"]))}

        return await self._control(request, act)

    async def post_human(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            user = str(body.get("user") or HUMAN_USER)
            message = self.slack.post_as_user(
                str(body["channel"]), str(body["text"]), user, body.get("thread_ts")
            )
            return {"message": message}

        return await self._control(request, act)

    async def push_event(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            if not isinstance(body, dict) or not body:
                raise ValueError("the body must be the Events API payload (a JSON object)")
            envelope_type = request.query_params.get("type", "events_api")
            return {"envelope_id": self.slack.push_event(body, envelope_type)}

        return await self._control(request, act)

    async def list_acks(self, request: Request) -> Response:
        async def act(_body: Json) -> Json:
            envelopes = [dataclasses.asdict(e) for e in self.slack.hub.envelopes()]
            return {"acks": self.slack.acks(), "envelopes": envelopes}

        return await self._control(request, act)

    async def disconnect(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            reason = body.get("reason", "refresh_requested")
            return {"connections": await self.slack.hub.disconnect_async(reason, body.get("close_after"))}

        return await self._control(request, act)

    async def revoke(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            self.slack.revoke(str(body["token"]), str(body.get("error") or "token_revoked"))
            return {}

        return await self._control(request, act)

    async def list_calls(self, request: Request) -> Response:
        async def act(body: Json) -> Json:
            return {"calls": [dataclasses.asdict(c) for c in self.slack.calls(body.get("method"))]}

        return await self._control(request, act)


def build_app(standin: SlackStandin) -> Starlette:
    """The ASGI app; its lifespan binds the Socket Mode hub to the serving loop."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> Any:
        standin.hub.attach(asyncio.get_running_loop())
        try:
            yield
        finally:
            await standin.hub.detach()

    return Starlette(routes=_Http(standin).routes(), lifespan=lifespan)


def _server(standin: SlackStandin) -> uvicorn.Server:
    return asgi_thread.server(build_app(standin), lifespan="on")


@contextlib.contextmanager
def running(
    standin: SlackStandin | None = None, *, host: str = "127.0.0.1", **options: Any
) -> Iterator[SlackStandin]:
    """Serve a stand-in on a free port of `host` in a background thread; `options` go to SlackStandin."""
    if standin is not None and options:
        raise TypeError("pass either a SlackStandin or its options, not both")
    slack = standin or SlackStandin(**options)
    sock, slack.url = asgi_thread.listen(host)
    with asgi_thread.running(_server(slack), sock, "slack-standin"):
        yield slack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.local.slack_standin", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--bot-token", action="append", help=f"repeatable; default {DEFAULT_BOT_TOKEN}")
    parser.add_argument("--app-token", action="append", help=f"repeatable; default {DEFAULT_APP_TOKEN}")
    parser.add_argument("--channel", action="append", help=f"repeatable; default {DEFAULT_CHANNEL}")
    parser.add_argument("--ack-timeout", type=float, default=3.0, help="seconds before an envelope is resent")
    parser.add_argument("--max-retries", type=int, default=3)
    args = parser.parse_args(argv)
    slack = SlackStandin(
        bot_tokens=args.bot_token or (DEFAULT_BOT_TOKEN,),
        app_tokens=args.app_token or (DEFAULT_APP_TOKEN,),
        channels=args.channel or (DEFAULT_CHANNEL,),
        ack_timeout=args.ack_timeout,
        max_retries=args.max_retries,
    )
    sock, slack.url = asgi_thread.listen(args.host, args.port)
    banner = f"slack stand-in: channels {slack.channels}; controls at {slack.url}/_standin/"
    asgi_thread.serve_cli(_server(slack), sock, slack.base_url, banner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
