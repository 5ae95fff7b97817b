"""Exactly one Slack message per post, under retries, rebalances, replays and kill -9.

Slack has no idempotency key, so a post is made like this (invariant 11):
1. Its outcome on record (this process's memory, or the projected `slack_posts`)? Done.
2. Else look in Slack for a message tagged with its id (metadata `event_payload.event_id`, read
   with `include_all_metadata`): found means a poster died between the call and its record;
   record `found` and stop.
3. Else record the intent (an event, acked), call `chat.postMessage`, record the outcome with
   Slack's ts (an event, acked).
Step 2 does not depend on the projector having caught up, so a crash anywhere costs at most one
lookup, never a second message. A replay rebuilds Postgres from the log and posts nothing: only
this poster speaks, and only for posts it finds no record of.

What is posted: each post of a *committed* round (a post waits for its round's marker, so a
round that died half-way says nothing and its retry speaks once), and each firing alert whose
incident has no Slack thread yet: that message, in the channel its route names, becomes the
thread's root, recorded with `root` so that replies in it join the incident.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from schemas.events import AlertReceived, EventBase, RoundCommitted, SlackPostRecorded, ThreadPost
from schemas.ids import split_thread_key, voice_id
from services.boundary.redact import redact_text, redact_value
from services.runtime.logs import about
from services.voice.blocks import SlackMessage, alert_blocks, metadata, post_blocks
from services.voice.routing import route

log = logging.getLogger("agent.voice")


class Records(Protocol):
    """What the projection knows of the voice (read-only)."""

    def outcome(self, post_id: str) -> str | None:
        """Slack's ts of a post that was posted or found, if on record."""
        ...

    def root_of(self, thread: str) -> tuple[str, str] | None:
        """(channel, ts) of the Slack thread an alert opened for this incident, if on record."""
        ...


class Slack(Protocol):
    def find(self, channel: str, root_ts: str | None, post_id: str) -> Awaitable[str | None]: ...

    def post(self, message: SlackMessage) -> Awaitable[str]: ...

    def is_private(self, channel: str) -> Awaitable[bool | None]:
        """Whether a channel is private (`conversations.info`); None when Slack would not say."""
        ...


@dataclass(frozen=True)
class Delivery:
    post_id: str
    thread: str
    round: int | None
    channel: str
    thread_ts: str | None  # None: a thread's root
    text: str
    blocks: list[dict[str, Any]]


@dataclass
class Outcome:
    posted: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (post id, why)


Emit = Callable[[EventBase], Awaitable[None]]


def outgoing(d: Delivery) -> SlackMessage:
    """What Slack is sent for a delivery. The last step before Slack: whatever built the text, no
    credential is posted (invariant 13)."""
    text, blocks = redact_text(d.text), redact_value(d.blocks)
    return SlackMessage(d.channel, d.thread_ts, text, blocks, metadata(d.post_id, d.thread))


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class Voice:
    """Turns each committed post into exactly one Slack message, recording intent and outcome."""

    slack: Slack
    records: Records
    emit: Emit
    routes: list[tuple[str, str, str]]
    default_channel: str | None
    now: Callable[[], datetime] = _utc_now
    # What this process has seen: posts awaiting their round's marker; post id -> Slack ts recorded;
    # incident key -> its Slack thread; channel -> is_private (asked once).
    pending: dict[str, ThreadPost] = field(default_factory=dict, init=False)
    done: dict[str, str] = field(default_factory=dict, init=False)
    roots: dict[str, tuple[str, str]] = field(default_factory=dict, init=False)
    privacy: dict[str, bool | None] = field(default_factory=dict, init=False)
    outcome: Outcome = field(default_factory=Outcome, init=False)

    async def handle(self, event: EventBase) -> None:
        """One event of incident.events, in its partition's order."""
        if isinstance(event, ThreadPost):
            self.pending[event.message_id] = event  # a retried round's post replaces the dead one's
        elif isinstance(event, RoundCommitted):
            for mid in event.message_ids:
                post = self.pending.pop(mid, None)
                if post is not None:
                    await self._post_reply(post)
        elif (
            isinstance(event, AlertReceived)
            and event.status == "firing"
            and event.message_id.endswith(":alert:0")
        ):
            await self._open_thread(event)
        elif isinstance(event, SlackPostRecorded) and event.phase != "intent" and event.slack_ts:
            self.done.setdefault(event.post_id, event.slack_ts)
            if event.root:
                self.roots.setdefault(event.thread_ts, (event.channel, event.slack_ts))

    def waiting(self) -> int:
        return len(self.pending)

    async def _open_thread(self, alert: AlertReceived) -> None:
        channel, _ = split_thread_key(alert.thread_ts)
        if channel is not None:
            return  # the incident already lives in a Slack thread
        target = route(alert.alert, self.routes, self.default_channel)
        if target is None:
            self.outcome.skipped.append((alert.message_id, "no route and no default channel"))
            log.warning("alert not posted: no channel", extra=about(alert.thread_ts, alert.message_id))
            return
        text, blocks = alert_blocks(alert)
        ts = await self._deliver(
            Delivery(alert.message_id, alert.thread_ts, None, target, None, text, blocks)
        )
        if ts is not None:
            self.roots[alert.thread_ts] = (target, ts)

    async def _post_reply(self, post: ThreadPost) -> None:
        where = await self._thread_of(post.thread_ts)
        if where is None:
            self.outcome.skipped.append((post.message_id, "the incident has no Slack thread"))
            log.warning("post not sent: no Slack thread", extra=about(post.thread_ts, post.message_id))
            return
        text, blocks = post_blocks(post)
        await self._deliver(
            Delivery(post.message_id, post.thread_ts, post.round, where[0], where[1], text, blocks)
        )

    async def _thread_of(self, thread: str) -> tuple[str, str] | None:
        """Where an incident's replies go: its own key names it, or the root its alert was posted as
        (asked of the projection off the event loop, as every other read of it here is)."""
        channel, ts = split_thread_key(thread)
        if channel is not None:
            return channel, ts
        return self.roots.get(thread) or await asyncio.to_thread(self.records.root_of, thread)

    async def _deliver(self, d: Delivery) -> str | None:
        known = self.done.get(d.post_id) or await asyncio.to_thread(self.records.outcome, d.post_id)
        if known is not None:
            self.done[d.post_id] = known
            return known
        # Asked before the post, so nothing but the record follows Slack's answer (a root only).
        private = await self._channel_private(d.channel) if d.thread_ts is None else None
        found = await self.slack.find(d.channel, d.thread_ts, d.post_id)
        if found is not None:  # posted by a poster that died before its record
            await self._record(d, "found", found, private)
            self.outcome.found.append(d.post_id)
            return found
        await self._record(d, "intent", None, None)
        ts = await self.slack.post(outgoing(d))
        await self._record(d, "posted", ts, private)
        self.outcome.posted.append(d.post_id)
        log.info("posted", extra=about(d.thread, d.post_id, channel=d.channel, slack_ts=ts))
        return ts

    async def _channel_private(self, channel: str) -> bool | None:
        """Where an alert-opened incident may be seen (invariant 14): asked of Slack once per channel."""
        if channel not in self.privacy:
            self.privacy[channel] = await self.slack.is_private(channel)
        return self.privacy[channel]

    async def _record(self, d: Delivery, phase: str, ts: str | None, private: bool | None) -> None:
        await self.emit(
            SlackPostRecorded(
                thread_ts=d.thread,
                message_id=voice_id(d.post_id, phase),
                event_time=self.now(),
                round=d.round,
                post_id=d.post_id,
                phase=phase,  # type: ignore[arg-type]
                channel=d.channel,
                slack_ts=ts,
                root=d.thread_ts is None,
                channel_private=private,
            )
        )
        if ts is not None:
            self.done[d.post_id] = ts
