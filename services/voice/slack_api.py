"""The Slack Web API as the poster needs it, through the official `slack_sdk` AsyncWebClient.

Rate limits: slack_sdk's `AsyncRateLimitErrorRetryHandler` retries a 429 after its `Retry-After`
(by default only once; here up to `RATE_LIMIT_RETRIES` times), and passing `retry_handlers`
replaces the default connection-error handler, so that one is added back. The token goes in
the `Authorization` header and is never logged or written into an event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from services.runtime.errors import UserFacingError
from services.voice.blocks import METADATA_EVENT_TYPE, SlackMessage
from services.voice.metrics import POST_FAILURES, failure_label

SLACK_API_URL = "https://slack.com/api/"
RATE_LIMIT_RETRIES = 20
SEARCH_PAGES = 10  # pages of 200 messages searched for a tagged post after a crash

log = logging.getLogger("agent.voice.slack")
logging.getLogger("slack_sdk").setLevel(logging.WARNING)  # its debug logs carry request headers


@dataclass(frozen=True)
class Identity:
    team: str
    user_id: str
    url: str


def client(token: str, base_url: str = SLACK_API_URL, timeout: int = 30) -> AsyncWebClient:
    handlers: list[AsyncRetryHandler] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=3),
        AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
    ]
    return AsyncWebClient(token=token, base_url=base_url, timeout=timeout, retry_handlers=handlers)


async def check_token(web: AsyncWebClient, name: str = "SLACK_BOT_TOKEN") -> Identity:
    """`auth.test` at start: a missing, wrong or revoked token is a one-line error naming it."""
    if not web.token:
        raise UserFacingError(f"{name} is not set")
    try:
        answer = await web.auth_test()
    except SlackApiError as exc:
        raise UserFacingError(
            f"{name} was refused by Slack at {web.base_url} ({exc.response.get('error', 'error')})"
        ) from None
    except Exception as exc:  # a wrong URL, a refused connection
        raise UserFacingError(
            f"Slack is not reachable at {web.base_url} ({type(exc).__name__}: {exc})"
        ) from None
    return Identity(str(answer.get("team", "")), str(answer.get("user_id", "")), str(answer.get("url", "")))


def _tagged(message: dict[str, Any], post_id: str) -> bool:
    meta = message.get("metadata")
    if not isinstance(meta, dict) or meta.get("event_type") != METADATA_EVENT_TYPE:
        return False
    payload = meta.get("event_payload")
    return isinstance(payload, dict) and payload.get("event_id") == post_id


class SlackWeb:
    """The poster's two Slack calls (`poster.Slack`), on slack_sdk's AsyncWebClient."""

    def __init__(self, web: AsyncWebClient) -> None:
        self.web = web

    async def find(self, channel: str, root_ts: str | None, post_id: str) -> str | None:
        """The ts of a message tagged with `post_id`: among a thread's replies, or, for a thread's
        root, among the channel's recent messages. Metadata comes back only with include_all_metadata."""
        cursor: str | None = None
        for _ in range(SEARCH_PAGES):
            if root_ts is None:
                answer = await self.web.conversations_history(
                    channel=channel, include_all_metadata=True, limit=200, cursor=cursor
                )
            else:
                answer = await self.web.conversations_replies(
                    channel=channel, ts=root_ts, include_all_metadata=True, limit=200, cursor=cursor
                )
            for message in answer.get("messages") or []:
                if isinstance(message, dict) and _tagged(message, post_id):
                    return str(message["ts"])
            cursor = (answer.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return None
        return None

    async def is_private(self, channel: str) -> bool | None:
        """`conversations.info`'s `is_private` (scopes `channels:read`, `groups:read`); None if Slack
        refuses (a missing scope, say): recall then treats the incident as private (it fails closed)."""
        try:
            answer = await self.web.conversations_info(channel=channel)
        except SlackApiError as exc:
            log.warning(
                "conversations.info refused: %s", exc.response.get("error"), extra={"channel": channel}
            )
            return None
        found = (answer.get("channel") or {}).get("is_private")
        return found if isinstance(found, bool) else None

    async def post(self, message: SlackMessage) -> str:
        """One `chat.postMessage`; Slack's ts of the new message. A failure is counted, then raised."""
        try:
            answer = await self.web.chat_postMessage(
                channel=message.channel,
                thread_ts=message.thread_ts,
                text=message.text,
                blocks=message.blocks,
                metadata=message.metadata,
            )
        except Exception as exc:
            POST_FAILURES.labels(error=failure_label(exc)).inc()
            raise
        return str(answer["ts"])
