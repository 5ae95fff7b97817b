"""Deterministic message ids: `thread_ts:round:node:i` (invariant 1).

Ids are computed from what the round contains, never from a clock or a random
number, so a retried round produces the same ids and the projector's
`ON CONFLICT (id) DO NOTHING` makes the retry harmless.
"""

from __future__ import annotations

import hashlib
from typing import Any

from schemas.canonical import canonical_json_bytes

NULL_ROUND = "-"  # the round part of the id of a row outside any round (alert, human turns)


def message_id(thread_ts: str, round_: int | None, node: str, i: int | str) -> str:
    """Build `thread_ts:round:node:i`. `round_` None renders as '-' (a row outside any round)."""
    if ":" in node:
        raise ValueError(f"node name may not contain ':': {node!r}")
    round_part = NULL_ROUND if round_ is None else str(round_)
    return f"{thread_ts}:{round_part}:{node}:{i}"


def parse_message_id(value: str) -> tuple[str, int | None, str, str]:
    """Split an id back into (thread_ts, round, node, i). thread_ts itself never holds ':'."""
    thread_ts, round_part, node, i = value.split(":", 3)
    return thread_ts, None if round_part == NULL_ROUND else int(round_part), node, i


def voice_id(post_id: str, phase: str) -> str:
    """The id of a post's intent or outcome record: `T:R:voice:<phase>.<node>.<i>` beside the post's."""
    thread, round_, node, i = parse_message_id(post_id)
    return message_id(thread, round_, "voice", f"{phase}.{node}.{i}")


THREAD_KEY_SEPARATOR = "-"


def thread_key(channel: str | None, ts: str) -> str:
    """A Slack thread's identity in the pipeline: `C0123ABCD-1773458070.000100`.

    A Slack ts is unique only within its channel, so a thread is (channel, ts). Channel ids are
    letters and digits, a ts digits and one dot: the key holds neither ':' (the id separator)
    nor an ambiguity. A thread whose channel is not known (rows projected before channels were
    part of the key, an alert's own incident key) is its ts alone."""
    return f"{channel}{THREAD_KEY_SEPARATOR}{ts}" if channel else ts


def split_thread_key(key: str) -> tuple[str | None, str]:
    """(channel, ts) of a thread key; channel None for a key that is a ts alone."""
    channel, sep, ts = key.rpartition(THREAD_KEY_SEPARATOR)
    return (channel, ts) if sep and channel else (None, key)


def canonical_args_hash(args: dict[str, Any]) -> str:
    """Hash of a tool call's arguments in canonical form: the tool-digest cache key."""
    return hashlib.sha256(canonical_json_bytes(args)).hexdigest()


def tool_call_id(thread_ts: str, round_: int, tool: str, args: dict[str, Any]) -> str:
    """A tool call id derived from its content, so a retried round calls with the same id."""
    digest = canonical_args_hash({"thread_ts": thread_ts, "round": round_, "tool": tool, "args": args})
    return f"call_{digest[:24]}"
