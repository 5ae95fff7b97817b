"""The Slack stand-in against the official slack_sdk, so passing tests prove wire compatibility.

Every call goes through slack_sdk's real clients (AsyncWebClient, WebClient, the aiohttp SocketModeClient)
pointed at the stand-in's loopback `base_url`; assertions then read the stand-in's state directly.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web import WebClient
from slack_sdk.web.async_client import AsyncWebClient

from deploy.local import loopback_http
from deploy.local.pipeline import Proc
from deploy.local.slack_standin import DEFAULT_CHANNEL, SlackStandin, running

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
TS = re.compile(r"^\d+\.\d{6}$")
CHANNEL = DEFAULT_CHANNEL
OTHER = "C0OTHER01"


@pytest.fixture
def slack() -> Iterator[SlackStandin]:
    with running(channels=[CHANNEL, OTHER], ack_timeout=0.5, max_retries=2, disconnect_grace=0.3) as standin:
        yield standin


def web(slack: SlackStandin, token: str | None = None, **kwargs: Any) -> AsyncWebClient:
    return AsyncWebClient(token=token or slack.bot_token, base_url=slack.base_url, timeout=10, **kwargs)


def sync_web(slack: SlackStandin, token: str | None = None) -> WebClient:
    return WebClient(token=token or slack.bot_token, base_url=slack.base_url, timeout=10)


def run(coro: Any, timeout: float = 30) -> Any:
    """Each test owns its event loop; the bound keeps a hung client from eating the suite's time."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def api_error(call: Callable[[], Any]) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        call()
    return info.value


async def async_api_error(coro: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        await coro
    return info.value


# --- auth ---------------------------------------------------------------------------------------------


def test_auth_test_ok_and_errors_async(slack: SlackStandin) -> None:
    async def scenario() -> None:
        ok = await web(slack).auth_test()
        assert ok["user_id"] == "U0BOTMEM1" and ok["team_id"] and ok["bot_id"] and ok["url"]
        assert (await async_api_error(web(slack, "xoxb-wrong").auth_test())).response[
            "error"
        ] == "invalid_auth"
        no_token = AsyncWebClient(base_url=slack.base_url, timeout=10)
        assert (await async_api_error(no_token.auth_test())).response["error"] == "not_authed"
        slack.revoke(slack.bot_token)
        assert (await async_api_error(web(slack).auth_test())).response["error"] == "token_revoked"

    run(scenario())
    calls = slack.calls("auth.test")
    assert [c.error for c in calls] == [None, "invalid_auth", "not_authed", "token_revoked"]
    assert all(c.status == 200 for c in calls)  # API errors are HTTP 200 with ok: false


def test_auth_test_sync_client_and_form_token(slack: SlackStandin) -> None:
    assert sync_web(slack).auth_test()["user_id"] == "U0BOTMEM1"
    assert api_error(lambda: sync_web(slack, "xoxb-nope").auth_test()).response["error"] == "invalid_auth"

    async def form_token() -> Any:  # `token` as a form field, no Authorization header
        return await AsyncWebClient(base_url=slack.base_url).api_call(
            "auth.test", data={"token": slack.bot_token}
        )

    assert run(form_token())["ok"] is True
    assert slack.calls("auth.test")[-1].content_type.startswith("application/x-www-form-urlencoded")


def test_token_inside_a_json_body_is_ignored_as_slack_does(slack: SlackStandin) -> None:
    reply = loopback_http.post(f"{slack.base_url}auth.test", json={"token": slack.bot_token})
    assert reply.status_code == 200 and reply.json() == {"ok": False, "error": "not_authed"}


def test_token_kinds_are_enforced(slack: SlackStandin) -> None:
    async def scenario() -> None:
        wrong_kind = await async_api_error(web(slack).apps_connections_open(app_token=slack.bot_token))
        assert wrong_kind.response["error"] == "not_allowed_token_type"
        app_posts = web(slack, slack.app_token).chat_postMessage(channel=CHANNEL, text="x")
        assert (await async_api_error(app_posts)).response["error"] == "not_allowed_token_type"
        url = (await web(slack).apps_connections_open(app_token=slack.app_token))["url"]
        assert url.startswith(f"ws://127.0.0.1:{slack.url.rsplit(':', 1)[1]}/link/?ticket=")

    run(scenario())
    assert slack.messages(CHANNEL) == []


def test_unknown_method(slack: SlackStandin) -> None:
    error = api_error(lambda: sync_web(slack).api_call("chat.frobnicate"))
    assert error.response["error"] == "unknown_method"


# --- messages and threads -----------------------------------------------------------------------------


def test_post_then_reply_with_thread_ts_and_metadata(slack: SlackStandin) -> None:
    metadata = {"event_type": "incident_round", "event_payload": {"round": 1, "thread": "T"}}
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*hypothesis*"}}]

    async def scenario() -> tuple[Any, Any]:
        client = web(slack)
        parent = await client.chat_postMessage(channel=CHANNEL, text="alert: disk full")
        reply = await client.chat_postMessage(
            channel=CHANNEL, text="hypothesis", thread_ts=parent["ts"], metadata=metadata, blocks=blocks
        )
        return parent, reply

    parent, reply = run(scenario())
    assert parent["channel"] == CHANNEL and TS.match(parent["ts"]) and TS.match(reply["ts"])
    assert float(reply["ts"]) > float(parent["ts"])
    message = reply["message"]
    assert message["ts"] == reply["ts"] and message["thread_ts"] == parent["ts"]
    assert message["user"] == "U0BOTMEM1" and message["bot_id"] and message["type"] == "message"
    assert message["metadata"] == metadata and "thread_ts" not in parent["message"]
    assert message["blocks"][0]["text"] == blocks[0]["text"] and message["blocks"][0]["block_id"]
    stored = slack.messages(CHANNEL)
    assert [m["ts"] for m in stored] == [parent["ts"], reply["ts"]]
    assert stored[1]["metadata"] == metadata and stored[1]["thread_ts"] == parent["ts"]
    assert slack.calls("chat.postMessage")[0].content_type.startswith("application/json")


def test_replies_return_metadata_only_with_include_all_metadata(slack: SlackStandin) -> None:
    metadata = {"event_type": "judge-verdict", "event_payload": {"grounded": True}}

    async def scenario() -> tuple[Any, Any, Any]:
        client = web(slack)
        parent = await client.chat_postMessage(channel=CHANNEL, text="parent", metadata=metadata)
        await client.chat_postMessage(channel=CHANNEL, text="r1", thread_ts=parent["ts"], metadata=metadata)
        await client.chat_postMessage(channel=CHANNEL, text="r2", thread_ts=parent["ts"])
        plain = await client.conversations_replies(channel=CHANNEL, ts=parent["ts"])
        full = await client.conversations_replies(channel=CHANNEL, ts=parent["ts"], include_all_metadata=True)
        return parent, plain, full

    parent, plain, full = run(scenario())
    assert [m["text"] for m in plain["messages"]] == ["parent", "r1", "r2"]
    assert all("metadata" not in m for m in plain["messages"])
    assert [m.get("metadata") for m in full["messages"]] == [metadata, metadata, None]
    head = full["messages"][0]
    assert head["ts"] == head["thread_ts"] == parent["ts"] and head["reply_count"] == 2
    assert full["has_more"] is False


def test_replies_paginate_with_cursor(slack: SlackStandin) -> None:
    client = sync_web(slack)  # the sync client sends these GET methods as form-encoded POSTs
    parent = client.chat_postMessage(channel=CHANNEL, text="p")["ts"]
    for i in range(5):
        client.chat_postMessage(channel=CHANNEL, text=f"r{i}", thread_ts=parent)
    texts: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = client.conversations_replies(channel=CHANNEL, ts=parent, limit=2, cursor=cursor)
        texts += [m["text"] for m in page["messages"]]
        pages += 1
        meta: dict[str, Any] = page.get("response_metadata") or {}
        cursor = meta.get("next_cursor")
        assert page["has_more"] is bool(cursor)
        if not cursor:
            break
    assert texts == ["p", "r0", "r1", "r2", "r3", "r4"] and pages == 3
    bad = api_error(lambda: client.conversations_replies(channel=CHANNEL, ts=parent, cursor="bm9wZQ=="))
    assert bad.response["error"] == "invalid_cursor"


def test_history_is_top_level_newest_first(slack: SlackStandin) -> None:
    async def scenario() -> Any:
        client = web(slack)
        first = await client.chat_postMessage(
            channel=CHANNEL, text="one", metadata={"event_type": "a", "event_payload": {}}
        )
        await client.chat_postMessage(channel=CHANNEL, text="reply", thread_ts=first["ts"])
        await client.chat_postMessage(channel=CHANNEL, text="two")
        return await client.conversations_history(channel=CHANNEL)

    history = run(scenario())
    assert [m["text"] for m in history["messages"]] == ["two", "one"]
    assert "metadata" not in history["messages"][1] and history["messages"][1]["reply_count"] == 1


def test_reply_to_unknown_thread_fails(slack: SlackStandin) -> None:
    async def scenario() -> None:
        client = web(slack)
        await client.chat_postMessage(channel=CHANNEL, text="parent")
        unknown = await async_api_error(
            client.chat_postMessage(channel=CHANNEL, text="x", thread_ts="1.000001")
        )
        assert unknown.response["error"] == "thread_not_found"
        malformed = await async_api_error(client.chat_postMessage(channel=CHANNEL, text="x", thread_ts="0"))
        assert malformed.response["error"] == "invalid_thread_ts"
        elsewhere = await client.chat_postMessage(channel=OTHER, text="other channel")
        cross = client.chat_postMessage(channel=CHANNEL, text="x", thread_ts=elsewhere["ts"])
        assert (await async_api_error(cross)).response["error"] == "thread_not_found"
        replies = client.conversations_replies(channel=CHANNEL, ts="1.000001")
        assert (await async_api_error(replies)).response["error"] == "thread_not_found"

    run(scenario())
    assert [m["text"] for m in slack.messages(CHANNEL)] == ["parent"]


def test_invalid_metadata_event_type_still_posts_with_a_warning(slack: SlackStandin) -> None:
    bad = {"event_type": "incident.round", "event_payload": {"round": 1}}
    reply = run(web(slack).chat_postMessage(channel=CHANNEL, text="posted anyway", metadata=bad))
    assert reply["ok"] is True and "metadata" not in reply["message"]
    assert reply["response_metadata"]["warnings"] == ["invalid_metadata_schema"]
    assert (
        slack.messages(CHANNEL)[0]["text"] == "posted anyway" and "metadata" not in slack.messages(CHANNEL)[0]
    )


def test_post_rules_channel_text_blocks(slack: SlackStandin) -> None:
    client = sync_web(slack)
    assert (
        api_error(lambda: client.chat_postMessage(channel="C0NOPE", text="x")).response["error"]
        == "channel_not_found"
    )
    with pytest.warns(UserWarning, match="top-level `text`"):  # slack_sdk warns, then still sends
        assert (
            api_error(lambda: client.chat_postMessage(channel=CHANNEL, text="")).response["error"]
            == "no_text"
        )
    too_long = {"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}
    invalid = api_error(lambda: client.chat_postMessage(channel=CHANNEL, text="x", blocks=[too_long]))
    assert invalid.response["error"] == "invalid_blocks" and "/blocks/0/text" in invalid.response["errors"][0]
    malformed = {"event_type": "x", "event_payload": "not an object"}
    error = api_error(lambda: client.chat_postMessage(channel=CHANNEL, text="x", metadata=malformed))
    assert error.response["error"] == "invalid_metadata_format"
    assert slack.messages(CHANNEL) == []


def test_form_encoded_post_with_json_string_fields(slack: SlackStandin) -> None:
    blocks = [{"type": "divider", "block_id": "d1"}]
    metadata = {"event_type": "post", "event_payload": {"n": 1}}

    async def scenario() -> Any:
        data = {
            "channel": CHANNEL,
            "text": "form",
            "blocks": json.dumps(blocks),
            "metadata": json.dumps(metadata),
        }
        return await web(slack).api_call("chat.postMessage", data=data)

    reply = run(scenario())
    assert reply["message"]["blocks"] == blocks and reply["message"]["metadata"] == metadata
    assert slack.calls("chat.postMessage")[0].content_type.startswith("application/x-www-form-urlencoded")


# --- rate limits ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_429s_are_retried_by_the_rate_limit_handler(slack: SlackStandin) -> None:
    slack.rate_limit("chat.postMessage", 3, retry_after=1)
    handlers: list[AsyncRetryHandler] = [AsyncRateLimitErrorRetryHandler(max_retry_count=5)]
    started = time.monotonic()
    reply = run(web(slack, retry_handlers=handlers).chat_postMessage(channel=CHANNEL, text="after 429s"))
    elapsed = time.monotonic() - started
    assert reply["ok"] is True and [m["text"] for m in slack.messages(CHANNEL)] == ["after 429s"]
    assert [c.status for c in slack.calls("chat.postMessage")] == [429, 429, 429, 200]
    assert 3.0 <= elapsed < 8.0  # the handler sleeps Retry-After + random() in [0, 1) per 429


def test_429_without_a_handler_raises(slack: SlackStandin) -> None:
    slack.rate_limit("chat.postMessage", 2, retry_after=7)
    error = run(async_api_error(web(slack).chat_postMessage(channel=CHANNEL, text="x")))
    assert error.response.status_code == 429 and error.response["error"] == "ratelimited"
    assert error.response.headers["Retry-After"] == "7"
    sync_error = api_error(lambda: sync_web(slack).chat_postMessage(channel=CHANNEL, text="x"))
    assert sync_error.response.status_code == 429
    assert slack.messages(CHANNEL) == []
    sync_web(slack).chat_postMessage(channel=CHANNEL, text="third call passes")
    assert len(slack.messages(CHANNEL)) == 1


# --- Socket Mode ----------------------------------------------------------------------------------------


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


class Listener:
    """A SocketModeClient on the stand-in, collecting every raw frame and every request."""

    def __init__(self, slack: SlackStandin, ack: bool = True) -> None:
        self.client = SocketModeClient(app_token=slack.app_token, web_client=web(slack), ping_interval=1)
        self.frames: list[dict[str, Any]] = []
        self.requests: asyncio.Queue[SocketModeRequest] = asyncio.Queue()
        self.ack = ack
        self.client.message_listeners.append(self.on_frame)
        self.client.socket_mode_request_listeners.append(self.on_request)

    async def on_frame(self, _client: Any, message: dict[str, Any], _raw: str | None) -> None:
        self.frames.append(message)

    async def on_request(self, client: Any, request: SocketModeRequest) -> None:
        if self.ack:
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        await self.requests.put(request)

    async def next(self, timeout: float = 10.0) -> SocketModeRequest:
        return await asyncio.wait_for(self.requests.get(), timeout)


def event_body(slack: SlackStandin, text: str) -> dict[str, Any]:
    message = slack.post_as_user(CHANNEL, text)
    return slack.event_callback(slack.message_event(CHANNEL, message))


def test_socket_mode_hello_event_and_ack(slack: SlackStandin) -> None:
    async def scenario() -> tuple[Listener, SocketModeRequest, str]:
        listener = Listener(slack)
        try:
            await listener.client.connect()
            await eventually(lambda: any(f.get("type") == "hello" for f in listener.frames))
            envelope_id = slack.push_event(event_body(slack, "disk is full again"))
            request = await listener.next()
            await eventually(lambda: envelope_id in slack.acks())
            return listener, request, envelope_id
        finally:
            await listener.client.close()

    listener, request, envelope_id = run(scenario())
    hello = next(f for f in listener.frames if f.get("type") == "hello")
    assert hello["num_connections"] == 1 and hello["connection_info"]["app_id"] == slack.workspace.app_id
    assert request.type == "events_api" and request.envelope_id == envelope_id
    assert (
        request.retry_attempt == 0
        and request.retry_reason == ""
        and request.accepts_response_payload is False
    )
    assert request.payload["event"]["text"] == "disk is full again"
    assert request.payload["type"] == "event_callback"
    assert slack.envelope(envelope_id).deliveries == [0] and slack.envelope(envelope_id).acked


def test_unacked_envelope_is_redelivered(slack: SlackStandin) -> None:
    async def scenario() -> tuple[SocketModeRequest, SocketModeRequest, str]:
        listener = Listener(slack, ack=False)
        try:
            await listener.client.connect()
            envelope_id = slack.push_event(event_body(slack, "unacked"))
            first = await listener.next()
            second = await listener.next()
            await listener.client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
            await eventually(lambda: slack.envelope(envelope_id).acked)
            return first, second, envelope_id
        finally:
            await listener.client.close()

    first, second, envelope_id = run(scenario())
    assert first.envelope_id == second.envelope_id == envelope_id
    assert (first.retry_attempt, second.retry_attempt) == (0, 1)
    assert (first.retry_reason, second.retry_reason) == ("", "timeout")
    assert slack.envelope(envelope_id).deliveries == [0, 1] and not slack.envelope(envelope_id).given_up


@pytest.mark.slow
def test_unacked_envelope_is_given_up_after_max_retries(slack: SlackStandin) -> None:
    async def scenario() -> list[int | None]:
        listener = Listener(slack, ack=False)
        try:
            await listener.client.connect()
            envelope_id = slack.push_event(event_body(slack, "ignored"))
            attempts = [(await listener.next()).retry_attempt for _ in range(3)]
            await eventually(lambda: slack.envelope(envelope_id).given_up)
            return attempts
        finally:
            await listener.client.close()

    assert run(scenario()) == [0, 1, 2]  # max_retries=2 in the fixture


@pytest.mark.parametrize(
    ("reason", "close_after"),
    [("refresh_requested", 30.0), (None, None)],
    ids=["disconnect-frame-alone", "dropped-without-frame"],
)
def test_client_reconnects_after_a_forced_disconnect(
    slack: SlackStandin, reason: str | None, close_after: float | None
) -> None:
    """With the close 30 s away, only the disconnect frame can trigger the reconnect; a bare drop relies
    on slack_sdk's CLOSE handling. Either way a new apps.connections.open URL and a new hello follow."""

    async def scenario() -> tuple[Listener, SocketModeRequest]:
        listener = Listener(slack)
        try:
            await listener.client.connect()
            await eventually(lambda: slack.hub.open_connections == 1)
            assert await asyncio.to_thread(slack.disconnect, reason, close_after) == 1
            await eventually(lambda: slack.hub.connections_opened == 2 and slack.hub.open_connections == 1)
            envelope_id = slack.push_event(event_body(slack, "after the refresh"))
            request = await listener.next()
            assert request.envelope_id == envelope_id
            await eventually(lambda: envelope_id in slack.acks())
            return listener, request
        finally:
            await listener.client.close()

    listener, request = run(scenario())
    assert sum(f.get("type") == "hello" for f in listener.frames) == 2
    assert len(slack.calls("apps.connections.open")) == 2  # a fresh URL for the new connection
    assert request.payload["event"]["text"] == "after the refresh"


def test_link_rejects_unissued_tickets(slack: SlackStandin) -> None:
    async def scenario() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.WSServerHandshakeError):
                await session.ws_connect(f"ws{slack.url.removeprefix('http')}/link/?ticket=forged")

    run(scenario())
    assert slack.hub.connections_opened == 0


# --- control endpoints, CLI, isolation --------------------------------------------------------------------


def test_control_endpoints(slack: SlackStandin) -> None:
    control = httpx.Client(base_url=f"{slack.url}/_standin", timeout=10)
    assert control.get("/health").json()["base_url"] == slack.base_url
    assert control.post("/ratelimit", json={"method": "auth.test", "count": 1, "retry_after": 2}).json()["ok"]
    limited = loopback_http.post(
        f"{slack.base_url}auth.test", headers={"Authorization": f"Bearer {slack.bot_token}"}
    )
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    posted = sync_web(slack).chat_postMessage(
        channel=CHANNEL, text="bot", metadata={"event_type": "e", "event_payload": {}}
    )
    human = control.post(
        "/messages", json={"channel": CHANNEL, "text": "human", "thread_ts": posted["ts"]}
    ).json()
    assert human["message"]["thread_ts"] == posted["ts"] and human["message"]["user"] == "U0HUMAN01"
    listed = control.get("/messages", params={"channel": CHANNEL}).json()["messages"]
    assert [m["text"] for m in listed] == ["bot", "human"] and listed[0]["metadata"]["event_type"] == "e"
    pushed = control.post("/events", json={"type": "event_callback", "event": {"type": "app_mention"}}).json()
    acks = control.get("/acks").json()
    assert acks["acks"] == [] and acks["envelopes"][0]["envelope_id"] == pushed["envelope_id"]
    assert control.post("/disconnect", json={"reason": "warning"}).json()["connections"] == 0
    assert control.post("/revoke", json={"token": slack.bot_token}).json()["ok"]
    assert api_error(lambda: sync_web(slack).auth_test()).response["error"] == "token_revoked"
    calls = control.get("/calls", params={"method": "auth.test"}).json()["calls"]
    assert [c["status"] for c in calls] == [429, 200] and calls[1]["error"] == "token_revoked"
    assert control.post("/messages", json={"channel": "C0NOPE", "text": "x"}).status_code == 400


def test_cli_prints_the_base_url_and_serves(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "deploy.local.slack_standin", "--port", "0", "--channel", "C0DEMO"]
    cmd += ["--bot-token", "xoxb-demo-1", "--app-token", "xapp-demo-1"]
    out, err = tmp_path / "standin.out", tmp_path / "standin.err"
    proc = Proc("slack-standin", cmd, dict(os.environ), out, cwd=ROOT, err_log=err).start()
    try:
        printed = proc.wait_line(r"^http://127\.0\.0\.1:\d+/api/$", 15)
        assert printed.string == proc.text().splitlines()[0]  # alone on stdout's first line
        base_url = printed.group()
        client = WebClient(token="xoxb-demo-1", base_url=base_url, timeout=10)
        deadline = time.monotonic() + 15
        while True:
            try:
                assert client.chat_postMessage(channel="C0DEMO", text="demo")["ok"]
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        proc.stop(15)


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (`from a.b import c` counts as a.b and a.b.c)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_service_imports_the_standin() -> None:
    """Services may launch it as a process (the demo does) but never import it."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "services").rglob("*.py")
        if "deploy.local.slack_standin" in imported_modules(path)
    ]
    assert offenders == []


def test_conversations_info_answers_whether_a_channel_is_private_through_the_posters_client() -> None:
    from services.voice.slack_api import SlackWeb

    with running(channels=[CHANNEL], private_channels=["C0SECRET1"]) as standin:
        answer = sync_web(standin).conversations_info(channel="C0SECRET1")
        assert answer["channel"]["id"] == "C0SECRET1" and answer["channel"]["is_private"] is True
        assert api_error(lambda: sync_web(standin).conversations_info(channel="C0NOPE")).response[
            "error"
        ] == ("channel_not_found")
        poster = SlackWeb(web(standin))
        assert run(poster.is_private(CHANNEL)) is False
        assert run(poster.is_private("C0SECRET1")) is True
        assert run(poster.is_private("C0NOPE")) is None  # Slack would not say: recall fails closed
