"""Synthetic incident events shared by the tests and the benchmarks: threads in the seed thread's shape.

Dev tooling (like the seed): the tests and the benchmarks import it, production never does. The events
are what the compacted topic carries (CompactedToolResult, not raw ToolResult).
"""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.events import (
    AiMessage,
    AlertReceived,
    CompactedToolResult,
    EventBase,
    HumanMessage,
    JudgeVerdict,
    RoundCommitted,
    ThreadPost,
    ToolCall,
    ToolResult,
)
from schemas.ids import message_id, tool_call_id
from schemas.tokens import count_value_tokens

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
DIGEST = {"total_lines": 5, "patterns": [{"pattern": "level=error msg=boom <N>", "count": 5}]}


def synthetic_round(
    thread_ts: str, round_: int, at: datetime, tools: int = 3, *, marker: bool = True
) -> list[EventBase]:
    """One agent round as the compacted topic carries it: ai with tool calls, tool rows, ..., marker."""
    calls = [
        ToolCall(
            id=tool_call_id(thread_ts, round_, "query_loki", {"q": f'{{app="api"}} |= "err{k}"'}),
            name="query_loki",
            args={"q": f'{{app="api"}} |= "err{k}"'},
        )
        for k in range(tools)
    ]
    events: list[EventBase] = []
    tick = iter(range(1, 1000))

    def t() -> datetime:
        return at + timedelta(seconds=next(tick))

    events.append(
        AiMessage(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, round_, "investigate", 0),
            event_time=t(),
            round=round_,
            node="investigate",
            text="Checking the logs around the window.",
            tool_calls=calls,
            model="bench-model",
        )
    )
    for k, call in enumerate(calls):
        raw = {
            "status": "success",
            "data": {
                "resultType": "streams",
                "result": [
                    {
                        "stream": {"app": "api"},
                        "values": [
                            [str(1710406800000000000 + j), f"level=error msg=boom {j}"] for j in range(5)
                        ],
                    }
                ],
            },
        }
        events.append(
            CompactedToolResult(
                thread_ts=thread_ts,
                message_id=message_id(thread_ts, round_, "tools", k),
                event_time=t(),
                round=round_,
                tool_call_id=call.id,
                tool=call.name,
                args=call.args,
                raw=raw,
                compact=DIGEST,
                tokens=count_value_tokens(DIGEST),
                raw_tokens=0,
                raw_sha256="0" * 64,
                compactor_version="bench",
                budget=800,
            )
        )
    events.append(
        AiMessage(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, round_, "investigate", 1),
            event_time=t(),
            round=round_,
            node="investigate",
            text="Done investigating.",
            model="bench-model",
        )
    )
    hyp = message_id(thread_ts, round_, "hypothesis", 0)
    events.append(
        AiMessage(
            thread_ts=thread_ts,
            message_id=hyp,
            event_time=t(),
            round=round_,
            node="hypothesis",
            text="The API pods ran out of heap at 09:02.",
            model="bench-model",
        )
    )
    events.append(
        JudgeVerdict(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, round_, "judge", 0),
            event_time=t(),
            round=round_,
            grounded=round_ > 1,
            questions=[] if round_ > 1 else ["Which deploy?", "Since when?"],
            hypothesis_id=hyp,
            model="bench-judge",
        )
    )
    events.append(
        ThreadPost(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, round_, "post", 0),
            event_time=t(),
            round=round_,
            kind="summary" if round_ > 1 else "questions",
            text="Heap exhaustion on api.",
            model="bench-model",
        )
    )
    if marker:
        events.append(
            RoundCommitted(
                thread_ts=thread_ts,
                message_id=message_id(thread_ts, round_, "commit", 0),
                event_time=t(),
                round=round_,
                message_ids=[e.message_id for e in events],
            )
        )
    return events


def synthetic_human(thread_ts: str, at: datetime, n: int, *, mention: bool = False) -> HumanMessage:
    ts = f"{at.timestamp():.6f}".replace(".", "") + f"{n:03d}"
    return HumanMessage(
        thread_ts=thread_ts,
        message_id=message_id(thread_ts, None, "human", ts),
        event_time=at,
        user=f"U{n:05d}",
        ts=ts,
        text=f"<@BOT> any idea? {n}" if mention else f"seeing 502s on checkout {n}",
        mention=mention,
    )


def synthetic_thread(thread_ts: str, at: datetime = T0) -> list[EventBase]:
    """The seed thread's shape: 20 rows, 22 events (two round markers)."""
    events: list[EventBase] = [
        AlertReceived(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, None, "alert", 0),
            event_time=at,
            status="firing",
            service="checkout-api",
            alertname="HighErrorRate",
            fingerprint="f" * 16,
            window_start=at - timedelta(minutes=30),
            window_end=at,
            alert={"labels": {"severity": "page"}},
        )
    ]
    events += synthetic_round(thread_ts, 1, at + timedelta(minutes=1), tools=3)
    events += [synthetic_human(thread_ts, at + timedelta(minutes=10 + k), k) for k in range(4)]
    events.append(synthetic_human(thread_ts, at + timedelta(minutes=20), 4, mention=True))
    events += synthetic_round(thread_ts, 2, at + timedelta(minutes=21), tools=1)
    return events


def interleave(threads: list[list[EventBase]]) -> list[EventBase]:
    """Round-robin the threads' events (each thread keeps its own order), as live traffic would."""
    out: list[EventBase] = []
    cursors = [0] * len(threads)
    live = list(range(len(threads)))
    while live:
        nxt = []
        for k in live:
            out.append(threads[k][cursors[k]])
            cursors[k] += 1
            if cursors[k] < len(threads[k]):
                nxt.append(k)
        live = nxt
    return out


# ---- raw tool answers --------------------------------------------------------------------------


def loki(n: int, level: str = "info") -> dict[str, Any]:
    """A Loki query_range answer of `n` lines, each its own pattern (each one word longer than the last):
    over a small budget it needs the selector."""
    words = [string.ascii_lowercase[i // 26 % 26] + string.ascii_lowercase[i % 26] + "x" for i in range(n)]
    values = [
        [str(1773457200000000000 + i * 10**9), f"{level} worker finished {' '.join(words[: i + 1])}"]
        for i in range(n)
    ]
    return {
        "status": "success",
        "data": {"resultType": "streams", "result": [{"stream": {"app": "x"}, "values": values}]},
    }


def repetitive(n: int) -> dict[str, Any]:
    """A Loki query_range answer of `n` lines of one pattern (numbers differ): compacts without a selector."""
    values = [[str(1773457200000000000 + i * 10**9), f"GET /health status=200 took={i}ms"] for i in range(n)]
    return {
        "status": "success",
        "data": {"resultType": "streams", "result": [{"stream": {"app": "x"}, "values": values}]},
    }


def raw_tool_result(
    thread_ts: str,
    i: int,
    raw: Any,
    tool: str = "query_loki",
    *,
    at: datetime = T0,
    alert_context: dict[str, Any] | None = None,
) -> ToolResult:
    """Round 1's i-th tool result of a thread, raw (what the compactor consumes)."""
    return ToolResult(
        thread_ts=thread_ts, message_id=f"{thread_ts}:1:tools:{i}", event_time=at, round=1,
        tool_call_id=f"call_{i}", tool=tool, args={}, raw=raw, alert_context=alert_context or {},
    )  # fmt: skip


def raw_thread(thread_ts: str) -> list[EventBase]:
    """The seed-shaped synthetic thread as incident.events carries it: raw ToolResults, not compacted.

    Round 2 re-asks round 1's query in the benchmark data; a real agent reads the digest cache
    instead, so the round goes into the args here to keep "no tool called twice" meaningful.
    """
    out: list[EventBase] = []
    for e in synthetic_thread(thread_ts):
        if isinstance(e, CompactedToolResult):
            e = ToolResult(
                thread_ts=e.thread_ts, message_id=e.message_id, event_time=e.event_time, round=e.round,
                tool_call_id=e.tool_call_id, tool=e.tool, args={**e.args, "round": e.round}, raw=e.raw,
                alert_context={"service": "checkout-api"},
            )  # fmt: skip
        out.append(e)
    return out


def raw_threads(n: int, prefix: str = "1712") -> list[EventBase]:
    """`n` raw threads, interleaved as a live stream would carry them."""
    return interleave([raw_thread(f"{prefix}{k:06d}.000100") for k in range(n)])
