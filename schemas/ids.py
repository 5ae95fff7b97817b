"""Deterministic message ids: `thread_ts:round:node:i` (invariant 1).

Ids are computed from what the round contains, never from a clock or a random
number, so a retried round produces the same ids and the projector's
`ON CONFLICT (id) DO NOTHING` makes the retry harmless.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

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


def canonical_args_hash(args: dict[str, Any]) -> str:
    """Hash of a tool call's arguments in canonical form: the tool-digest cache key."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def tool_call_id(thread_ts: str, round_: int, tool: str, args: dict[str, Any]) -> str:
    """A tool call id derived from its content, so a retried round calls with the same id."""
    digest = canonical_args_hash({"thread_ts": thread_ts, "round": round_, "tool": tool, "args": args})
    return f"call_{digest[:24]}"
