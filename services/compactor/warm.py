"""The compactor's warm-up: one small tool result per built-in compactor through `stream.process`.

Run by `incident-memory compactor` before the worker starts, so before `/healthz` can say ready:
the token encoding loads (its cost: benchmarks/bench_compactor_core.py, cold), and each compactor's patterns compile and its first-use paths
run, on raws in the real systems' formats, instead of on the first tool result of each kind.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas.events import ToolResult
from services.compaction.config import BUILTIN, CompactorConfig
from services.compactor.stream import Result, process
from services.runtime.warmup import run_steps, warm_tokens

_NS = 1_700_000_000_000_000_000
SAMPLES: dict[str, Any] = {
    "query_loki": {
        "status": "success",
        "data": {
            "resultType": "streams",
            "result": [
                {
                    "stream": {"app": "warm-up", "pod": "warm-up-1"},
                    "values": [
                        [str(_NS + i * 1_000_000_000), f'level={lvl} msg="warm-up {i}" duration_ms={7 * i}']
                        for i, lvl in enumerate(("info", "info", "error", "warn"))
                    ],
                }
            ],
        },
    },
    "query_prometheus": {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"__name__": "up", "job": "warm-up", "instance": f"10.0.0.{n}:9090"},
                    "values": [[1_700_000_000 + 15 * i, str((i * n) % 3)] for i in range(8)],
                }
                for n in (1, 2)
            ],
        },
    },
    "get_pod_events": {
        "kind": "EventList",
        "apiVersion": "v1",
        "items": [
            {
                "reason": reason,
                "message": f"{reason} warm-up container in pod warm-up-{n}",
                "count": 3,
                "type": "Warning",
                "firstTimestamp": "2023-11-14T22:13:20Z",
                "lastTimestamp": "2023-11-14T22:14:20Z",
                "involvedObject": {"kind": "Pod", "name": f"warm-up-{n}", "namespace": "default"},
            }
            for n, reason in enumerate(("BackOff", "Unhealthy"))
        ],
    },
    "query_tempo": {
        "batches": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "warm-up"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "AAAAAAAAAAAAAAAAAAAAAQ==",
                                "spanId": f"AAAAAAAAAA{n}=",
                                **({"parentSpanId": "AAAAAAAAAAE="} if n != "E" else {}),
                                "name": f"GET /warm-up/{n}",
                                "startTimeUnixNano": str(_NS),
                                "endTimeUnixNano": str(_NS + 100_000_000),
                                "status": {"code": 2} if n == "I" else {},
                            }
                            for n in ("E", "I")
                        ]
                    }
                ],
            }
        ]
    },
    "warm_up_passthrough": {"note": "a tool no compactor knows: the passthrough", "n": [1, 2.5, None]},
}


def sample_records() -> list[tuple[str, bytes]]:
    """(tool, event bytes) for each sample: what the worker reads off the events topic."""
    out = []
    for i, (tool, raw) in enumerate(SAMPLES.items()):
        ts = "1700000000.000001"
        event = ToolResult(
            thread_ts=ts,
            message_id=f"{ts}:1:tools:{i}",
            event_time=datetime(2026, 1, 1, tzinfo=UTC),
            round=1,
            tool_call_id=f"warm-up-{i}",
            tool=tool,
            args={},
            raw=raw,
        )
        out.append((tool, event.to_bytes()))
    return out


def compact_samples(config: CompactorConfig = BUILTIN) -> dict[str, Result]:
    """Every sample through `process` (never raises: what cannot be compacted is a `Dead`)."""
    return {
        tool: process(
            value,
            key=b"warm-up",
            topic="warm-up",
            partition=0,
            offset=0,
            recorded=lambda _key: None,
            config=config,
        )
        for tool, value in sample_records()
    }


def warm_up(config: CompactorConfig = BUILTIN) -> dict[str, float]:
    """Seconds per step: the token encoding, then the compactors."""
    return run_steps({"tokens": warm_tokens, "compactors": lambda: compact_samples(config)}, "compactor")


__all__ = ["SAMPLES", "compact_samples", "sample_records", "warm_up"]
