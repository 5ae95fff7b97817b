"""Pay the first-use costs before a service says it is ready, so that its first event does not.

tiktoken loads its BPE ranks on the first count (the first tool result used to stall that long;
benchmarks/bench_compactor_core.py measures it cold), regular expressions compile on first use, and a client fetches a topic's metadata on its
first produce. A service runs its steps before its `/healthz` can say ready (its heartbeat only
beats after them). A step that fails is logged and skipped: a warm-up never stops a start, and what
it could not pay is paid by the first event, as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from schemas.events import Wake, parse_event
from schemas.tokens import count_tokens

log = logging.getLogger("incident_memory.warmup")


def run_steps(steps: Mapping[str, Callable[[], object]], service: str) -> dict[str, float]:
    """Run each step once, in order; seconds per step (logged as one line)."""
    spent: dict[str, float] = {}
    for name, step in steps.items():
        started = time.perf_counter()
        try:
            step()
        except Exception as exc:  # a warm-up never stops a start
            log.warning(
                "warm-up step failed", extra={"service": service, "step": name, "error": repr(exc)[:200]}
            )
        spent[f"{name}_s"] = round(time.perf_counter() - started, 4)
    log.info("warmed up", extra={"service": service, **spent})
    return spent


def warm_tokens() -> None:
    """Load the encoding and compile the counter's pattern (a text long enough to be cut at digit runs)."""
    count_tokens('warm-up: 2026-03-14T03:20:00Z level=info msg="tokens" duration_ms=12 status=200')


def warm_events() -> None:
    """One event through the decoder, the validator and the canonical encoder."""
    wake = Wake(
        thread_ts="1700000000.000001",
        message_id="1700000000.000001:-:wake:0",
        event_time=datetime(2026, 1, 1, tzinfo=UTC),
        reason="mention",
        trigger_message_id="1700000000.000001:-:human:1700000000.000002",
    )
    parse_event(wake.to_bytes())


__all__ = ["run_steps", "warm_events", "warm_tokens"]
