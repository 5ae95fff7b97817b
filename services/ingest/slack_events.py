"""Slack Events API payloads -> events. Pure: no I/O, so every branch is testable on its own.

Decisions (Slack retries any non-2xx, so a 4xx is only for input that is malformed):
- `url_verification` -> the challenge; `app_rate_limited` -> a deliberate ignore.
- Any other envelope type is not Slack's protocol -> 400 `unknown_event_type`.
- An inner event type we do not subscribe to (reactions, channel events, ...) -> 200 ignore.
- `message` in a thread (plain, thread_broadcast, file_share, me_message) -> HumanMessage.
  It carries mention=True when the text addresses the bot, so it equals the HumanMessage
  made from the matching `app_mention` byte for byte (same id, same content).
- `app_mention` -> HumanMessage(mention=True) + Wake(reason="mention"); the wake comes
  only from app_mention, so one mention wakes the agent once.
- `message_changed` -> a NEW HumanMessage (id from the edit's ts) with edit_of = the
  original ts: the event is a fact of its own; the projector makes it the original row's view.
- `message_deleted` -> MessageDeleted (id from the deleted message's ts): the projector hides
  that row from the model's context; the raw stays in the row.
- The bot's own messages (bot_id, bot_message subtype, or the configured bot user) and
  other subtypes (channel_join, ...) -> a deliberate 200 ignore.
- Messages outside a thread (no thread_ts) -> ignore: an incident lives in a thread.
- A `message` event's `channel_type` (public `channel`, private `group`, `im`, `mpim`) is kept on the
  HumanMessage, so recall knows where the incident may be seen (invariant 14). `app_mention` has none:
  the two events of one mention share the id and the row, and differ in that field only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.events import ChannelType, HumanMessage, MessageDeleted, Wake
from schemas.ids import message_id, thread_key
from services.ingest.planned import Planned, get_dict, get_str, slack_ts, ts_to_datetime
from services.ingest.rejections import Ignored, Rejected, missing

TEXT_SUBTYPES = {None, "thread_broadcast", "file_share", "me_message"}
CHANNEL_TYPES: tuple[ChannelType, ...] = ("channel", "group", "im", "mpim")
IGNORED_ENVELOPES = {"app_rate_limited"}


@dataclass(frozen=True)
class Challenge:
    value: str


@dataclass(frozen=True)
class Callback:
    """An event_callback: its event id (for retry dedupe) and the events it becomes."""

    event_id: str
    planned: list[Planned]


# (channel, Slack thread_ts) -> the thread's key in the pipeline. By default the Slack thread
# itself; ingest passes its directory, which knows the threads that alerts opened.
Threads = Callable[[str | None, str], str]


def map_payload(
    payload: dict[str, Any], bot_user_id: str | None, threads: Threads = thread_key
) -> Challenge | Callback:
    """Map one verified Slack request body. Raises Rejected (4xx) or Ignored (200)."""
    kind = get_str(payload, "type", "")
    if kind == "url_verification":
        return Challenge(get_str(payload, "challenge", "") or "")
    if kind in IGNORED_ENVELOPES:
        raise Ignored(f"envelope:{kind}")
    if kind != "event_callback":
        raise Rejected(400, "unknown_event_type", f"envelope type {kind!r}")
    event_id = get_str(payload, "event_id", "") or ""
    if not event_id:
        raise missing("event_id")
    event = get_dict(payload, "event", "")
    return Callback(event_id, map_event(event, bot_user_id, threads))


def map_event(event: dict[str, Any], bot_user_id: str | None, threads: Threads = thread_key) -> list[Planned]:
    kind = get_str(event, "type", "event.")
    if kind == "app_mention":
        return _mention(event, bot_user_id, threads)
    if kind == "message":
        return _message(event, bot_user_id, threads)
    raise Ignored(f"event_type_not_handled:{str(kind)[:64]}")


def _thread(event: dict[str, Any], where: str, threads: Threads, channel: str | None = None) -> str:
    """The key of the thread a message is in: Slack's (channel, thread_ts), through `threads`."""
    ts = slack_ts(event, "thread_ts", where, required=False)
    if ts is None:
        raise Ignored("not_in_thread")
    found = channel if channel is not None else event.get("channel")
    return threads(found if isinstance(found, str) and found else None, ts)


def _is_bot(obj: dict[str, Any], bot_user_id: str | None) -> str | None:
    if obj.get("bot_id") or obj.get("subtype") == "bot_message":
        return "bot_message"
    if bot_user_id and obj.get("user") == bot_user_id:
        return "own_message"
    return None


def _message(event: dict[str, Any], bot_user_id: str | None, threads: Threads) -> list[Planned]:
    subtype = event.get("subtype")
    if subtype == "message_changed":
        return _edit(event, bot_user_id, threads)
    if subtype == "message_deleted":
        return _deletion(event, bot_user_id, threads)
    if (why := _is_bot(event, bot_user_id)) is not None:
        raise Ignored(why)
    if subtype not in TEXT_SUBTYPES:
        raise Ignored(f"subtype_ignored:{str(subtype)[:64]}")
    thread_ts = _thread(event, "event.", threads)
    ts = slack_ts(event, "ts", "event.") or ""
    text = get_str(event, "text", "event.") or ""
    return [Planned("events", _human(thread_ts, ts, event, text, mentions(text, bot_user_id)))]


def mentions(text: str, bot_user_id: str | None) -> bool:
    """Does the text address the bot? Slack writes a mention `<@U123>` or `<@U123|label>`."""
    return (
        bool(bot_user_id) and re.search(rf"<@{re.escape(bot_user_id or '')}(?:\|[^>]*)?>", text) is not None
    )


def _mention(event: dict[str, Any], bot_user_id: str | None, threads: Threads) -> list[Planned]:
    if (why := _is_bot(event, bot_user_id)) is not None:
        raise Ignored(why)
    thread_ts = _thread(event, "event.", threads)
    ts = slack_ts(event, "ts", "event.") or ""
    text = get_str(event, "text", "event.") or ""
    human = _human(thread_ts, ts, event, text, mention=True)
    wake = Wake(
        thread_ts=thread_ts,
        message_id=message_id(thread_ts, None, "wake", ts),
        event_time=human.event_time,
        reason="mention",
        trigger_message_id=human.message_id,
        user=human.user,
    )
    return [Planned("events", human), Planned("wake", wake)]


def _edit(event: dict[str, Any], bot_user_id: str | None, threads: Threads) -> list[Planned]:
    new = get_dict(event, "message", "event.")
    if (why := _is_bot(new, bot_user_id)) is not None:
        raise Ignored(why)
    channel = event.get("channel") if isinstance(event.get("channel"), str) else None
    thread_ts = _thread(new, "event.message.", threads, channel)
    edit_ts = slack_ts(event, "ts", "event.", required=False) or slack_ts(event, "event_ts", "event.")
    original_ts = slack_ts(new, "ts", "event.message.") or ""
    text = get_str(new, "text", "event.message.") or ""
    mention = mentions(text, bot_user_id)
    return [Planned("events", _human(thread_ts, edit_ts or "", new, text, mention, edit_of=original_ts))]


def _deletion(event: dict[str, Any], bot_user_id: str | None, threads: Threads) -> list[Planned]:
    """`deleted_ts` names the deleted message; its thread comes from `previous_message` (the deleted
    message, as Slack sends it) or the event itself. Without a thread there is no row to hide, and a
    deleted message of the bot's own is not a human row."""
    old = event.get("previous_message")
    old = old if isinstance(old, dict) else {}
    if (why := _is_bot(old, bot_user_id)) is not None:
        raise Ignored(why)
    channel = event.get("channel") if isinstance(event.get("channel"), str) else None
    source, where = (old, "event.previous_message.") if "thread_ts" in old else (event, "event.")
    thread_ts = _thread(source, where, threads, channel)
    deleted_ts = slack_ts(event, "deleted_ts", "event.") or ""
    when = slack_ts(event, "ts", "event.", required=False) or slack_ts(event, "event_ts", "event.") or ""
    user = old.get("user")
    deletion = MessageDeleted(
        thread_ts=thread_ts,
        message_id=message_id(thread_ts, None, "deleted", deleted_ts),
        event_time=ts_to_datetime(when),
        ts=deleted_ts,
        user=user if isinstance(user, str) and user else None,
    )
    return [Planned("events", deletion)]


def _human(
    thread_ts: str, ts: str, source: dict[str, Any], text: str, mention: bool, edit_of: str | None = None
) -> HumanMessage:
    where = "event.message." if edit_of is not None else "event."
    user = get_str(source, "user", where) or ""
    kind = source.get("channel_type")
    return HumanMessage(
        thread_ts=thread_ts,
        message_id=message_id(thread_ts, None, "human", ts),
        event_time=ts_to_datetime(ts),
        user=user,
        ts=ts,
        text=text,
        mention=mention,
        edit_of=edit_of,
        channel_type=next((t for t in CHANNEL_TYPES if t == kind), None),  # an unknown type is left unsaid
    )
