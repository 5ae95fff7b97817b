"""Property: the COPY plan and the in-order plan leave the same tables, whatever the stream.

Streams start from two well-ordered threads (so most batches are ones the COPY plan takes) and
are then perturbed: events duplicated, dropped, swapped, moved, re-renders and state changes slipped in,
and the stream cut into batches anywhere. Each stream is projected twice into the same schema,
once with the production plans and once in order, and after every batch every table must be
equal, with the same events refused for the same reasons.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from property_depth import examples  # tests/ is on sys.path (pytest's rootdir conftest)

from deploy.local.testdata import T0, interleave, synthetic_human, synthetic_round, synthetic_thread
from schemas.events import EventBase, IncidentStateChanged, ReRendered
from schemas.ids import message_id
from schemas.tokens import count_value_tokens
from services.projector import plan_copy, store
from services.projector.mapping import map_event
from services.projector.plan import Plan

from .helpers import messages, table

pytestmark = pytest.mark.slow  # a property over the real database

T = "1710406800.000100"
U = "1710406900.000200"
TABLES = ("round_staging", "incident_state", "tool_digest_cache", "slack_posts", "projector_offsets")


def _re_render(thread: str, target: str, n: int) -> ReRendered:
    compact = {"one_line": f"api: 5 error lines ({n})"}
    return ReRendered(
        thread_ts=thread,
        message_id=message_id(thread, 9, "rerender", n),
        event_time=T0 + timedelta(hours=3, minutes=n),
        round=9,
        target_id=target,
        compact=compact,
        tokens=count_value_tokens(compact),
        policy="one_line",
    )


def _state(thread: str, minutes: int, status: str) -> IncidentStateChanged:
    return IncidentStateChanged(
        thread_ts=thread,
        message_id=message_id(thread, None, "state", minutes),
        event_time=T0 + timedelta(minutes=minutes),
        status=status,  # type: ignore[arg-type]
        service="checkout-api",
        window_start=T0 - timedelta(minutes=minutes),
        window_end=T0 + timedelta(minutes=minutes),
        opened_at=T0,
    )


BASE: list[EventBase] = interleave(
    [
        [*synthetic_thread(T)[:12], *synthetic_round(T, 3, T0 + timedelta(hours=1), tools=2)],
        [synthetic_thread(U)[0], *synthetic_round(U, 1, T0 + timedelta(minutes=3), tools=1)],
    ]
)
EXTRAS: list[EventBase] = [
    _re_render(T, message_id(T, 1, "tools", 0), 0),
    _re_render(T, message_id(T, 3, "investigate", 0), 1),
    _re_render(U, message_id(U, 1, "tools", 0), 2),
    _state(T, 90, "investigating"),
    _state(U, 30, "resolved"),
    synthetic_human(T, T0 + timedelta(minutes=40), 7),
]


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[EventBase], list[int]]:
    """A perturbed stream and the ends of its batches."""
    events = list(BASE)
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["duplicate", "drop", "swap", "move", "extra"]))
        # Early positions twice as likely: moving or dropping an alert is where plans could differ.
        i = draw(st.one_of(st.integers(0, 3), st.integers(0, len(events) - 1)))
        if kind == "duplicate":
            events.insert(draw(st.integers(i, len(events))), events[i])
        elif kind == "drop" and len(events) > 1:
            del events[i]
        elif kind == "swap" and i + 1 < len(events):
            events[i], events[i + 1] = events[i + 1], events[i]
        elif kind == "move":
            events.insert(draw(st.integers(0, len(events) - 1)), events.pop(i))
        elif kind == "extra":
            events.insert(i, draw(st.sampled_from(EXTRAS)))
    cuts = draw(st.lists(st.integers(1, len(events) - 1), max_size=6, unique=True))
    return events, [*sorted(cuts), len(events)]


def project(
    conn: psycopg.Connection, schema: str, events: Sequence[EventBase], ends: list[int], plans: Sequence[Plan]
) -> list[tuple[Any, ...]]:
    """Project `events` in batches ending at `ends`: the tables and refusals after each batch (then emptied).

    Every batch is compared, not only the end: a later batch can hide a difference (a round's bump).
    """
    after_each = []
    start = 0
    for end in ends:
        items = [(k, map_event(e)) for k, e in enumerate(events[start:end], start)]
        event(f"{store.choose_plan(items, plans).name} plan")
        with conn.transaction():
            result = store.apply_batch(
                conn,
                items,
                group="g",
                topic="t",
                partitions=[0],
                next_offsets={0: end},
                schema=schema,
                plans=plans,
            )
        refused = [(r.item, r.reason) for r in result.rejections]
        after_each.append((messages(conn), *(table(conn, name) for name in TABLES), refused))
        start = end
    conn.execute(f"TRUNCATE agent_messages, {', '.join(TABLES)}")
    conn.commit()
    return after_each


@pytest.fixture(autouse=True, scope="module")
def direct_copy_for_small_batches() -> Iterator[None]:
    """These streams' batches are small: let the COPY plan write visible rows straight in wherever it
    may, so that its direct path and its fallback meet the perturbations too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan_copy, "DIRECT_MIN_ROWS", 1)
        yield


@settings(
    max_examples=examples(deep_run=100, make_test=40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=streams())
def test_both_plans_give_the_same_tables(
    pg_conn: psycopg.Connection, pg_schema: str, stream: tuple[list[EventBase], list[int]]
) -> None:
    events, ends = stream
    copy = project(pg_conn, pg_schema, events, ends, store.PLANS)
    in_order = project(pg_conn, pg_schema, events, ends, (store.IN_ORDER,))
    assert copy == in_order
