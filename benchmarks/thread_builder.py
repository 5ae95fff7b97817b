"""Build an incident thread of N rounds as rows, from the seeded generators and the real compactors.

Round 1 and 2 follow the seed thread (20 rows for two rounds); later rounds repeat the shape
with fresh seeded raws. Benchmarks use it to store the *same* thread in our table and in a peer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from deploy.local.seed import seed_incident
from schemas.ids import message_id, tool_call_id
from services.compaction.registry import compact_tool_result

THREAD_TS = "1773458100.000100"
WINDOW = {"window_start": "2026-03-14T02:45:00Z", "window_end": "2026-03-14T03:45:00Z"}


@dataclass(frozen=True)
class Row:
    id: str
    round: int | None
    role: str
    tool_call_id: str | None
    content: Any
    compact: Any | None
    tokens_in_context: int
    created_at: datetime


def _raws_for_round(round_: int) -> list[tuple[str, dict[str, Any], Any]]:
    """The tool calls of a round and their raws: the seed incident's, with the round in the args.

    Odd rounds call Loki, Prometheus and the pod events; even rounds call Tempo, as in the seed.
    """
    seed = seed_incident()
    if round_ % 2 == 1:
        return [
            ("query_loki", {"query": '{app="checkout-api"}', "round": round_}, seed.loki),
            (
                "query_prometheus",
                {"query": "container_memory_working_set_bytes", "round": round_},
                seed.prometheus,
            ),
            ("get_pod_events", {"namespace": "shop", "round": round_}, seed.pod_events),
        ]
    return [("query_tempo", {"trace_id": "checkout", "round": round_}, seed.tempo)]


def build_thread(rounds: int, thread_ts: str = THREAD_TS) -> list[Row]:
    """The rows of a thread with `rounds` rounds, in projection order."""
    from schemas.tokens import count_value_tokens

    t0 = datetime(2026, 3, 14, 3, 15, tzinfo=UTC)
    rows: list[Row] = []

    def add(
        round_: int | None,
        node: str,
        i: int | str,
        role: str,
        content: Any,
        compact: Any = None,
        tcid: str | None = None,
    ) -> None:
        rows.append(
            Row(
                message_id(thread_ts, round_, node, i),
                round_,
                role,
                tcid,
                content,
                compact,
                count_value_tokens(compact if compact is not None else content),
                t0 + timedelta(seconds=len(rows)),
            )
        )

    add(
        None,
        "alert",
        0,
        "alert",
        {"alertname": "KubePodOOMKilled", "service": "checkout-api", "status": "firing", **WINDOW},
    )
    for r in range(1, rounds + 1):
        if r == 2:
            for i in range(4):
                add(
                    None,
                    "human",
                    f"17734581{i:02d}.000200",
                    "human",
                    {"user": f"U0{i}", "text": f"seen the heap graph? note {i}"},
                )
        if r >= 2:
            add(
                None,
                "human",
                f"17734582{r:02d}.000300",
                "human",
                {"user": "U09", "text": "@bot what changed?", "mention": True},
            )
        calls = [
            (name, args, raw, tool_call_id(thread_ts, r, name, args))
            for name, args, raw in _raws_for_round(r)
        ]
        add(
            r,
            "investigate",
            0,
            "ai",
            {
                "node": "investigate",
                "text": "",
                "tool_calls": [{"id": c[3], "name": c[0], "args": c[1]} for c in calls],
            },
        )
        for i, (name, _args, raw, tcid) in enumerate(calls):
            mid = message_id(thread_ts, r, "tools", i)
            outcome = compact_tool_result(
                name, raw, {"service": "checkout-api", "evidence_id": mid, **WINDOW}
            )
            add(r, "tools", i, "tool", raw, outcome.compact, tcid)
        add(r, "investigate", 1, "ai", {"node": "investigate", "text": "evidence gathered"})
        add(
            r,
            "hypothesis",
            0,
            "ai",
            {"node": "hypothesis", "text": f"round {r}: heap exhaustion after payload cache growth"},
        )
        grounded = r % 2 == 0
        add(
            r,
            "judge",
            0,
            "judge",
            {"grounded": grounded, "questions": [] if grounded else ["what grew?", "when?"]},
        )
        add(r, "post", 0, "post", {"kind": "summary" if grounded else "questions", "text": "..."})
    return rows
