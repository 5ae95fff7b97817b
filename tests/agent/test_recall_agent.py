"""Recall in the agent (issue 37), over the projector's own SQL on the real Postgres: at an alert's open,
through `recall_incidents`, and the rules that keep a private channel's incident in its channel.

The thread under test is alert-opened (its key names no channel; its root post does) and its round 1 is
in flight: the playbook's Loki answer is staged, not yet visible, and is what gives it a cause to match.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from schemas.events import (
    AlertReceived,
    CompactedToolResult,
    EventBase,
    HumanMessage,
    MadeFor,
    RecalledIncident,
    RecallRecorded,
    RoundCommitted,
    SlackPostRecorded,
)
from schemas.ids import message_id, voice_id
from schemas.recall_open import REASON_CHARS, recall_at_open
from services.agent.recall_step import recall_step
from services.boundary.scope import Scope, check_call
from services.context_render.context import ContextRow, LoadedContext, row_to_message
from services.projector import store
from services.projector.mapping import MappingError, Row, map_event
from services.telemetry_mcp.incident_recall import IncidentRecall, RecallUnavailable

pytestmark = pytest.mark.stack

OPENED = datetime(2026, 3, 14, 3, 14, 30, tzinfo=UTC)
CHANNEL, SECRET = "C0INCIDENT", "C0SECRETS1"
QUERY = "1773458070.000100"
PUBLIC_PAY, PRIVATE_PAY, NO_ROOT = "1773456870.000200", "1773456871.000300", "1773458071.000400"
OOM = "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"


def loki(n: int) -> dict[str, Any]:
    lines = [f"2026-03-14T03:12:{k % 60:02d}.187Z {OOM} pod=api-7d9f8b6c5-x{k:04d}" for k in range(n)]
    lines += [f'level=error msg="upstream timed out" after={k}ms' for k in range(n)]
    values = [[str(1773457200000000000 + k), line] for k, line in enumerate(lines)]
    return {
        "status": "success",
        "data": {"resultType": "streams", "result": [{"stream": {}, "values": values}]},
    }


def incident(
    thread: str, opened: datetime, *, root: tuple[str, bool] | None, committed: bool, text: str = ""
) -> list[EventBase]:
    alert = dict(
        thread_ts=thread, service="payments-api" if thread != QUERY else "checkout-api", alertname="KubePodOOMKilled",
        fingerprint="f", window_start=opened - timedelta(minutes=30), window_end=opened,
        alert={"commonLabels": {"namespace": "shop", "severity": "critical"}},
    )  # fmt: skip
    post_id, tool_id = message_id(thread, None, "alert", 0), message_id(thread, 1, "tools", 0)
    events: list[EventBase] = [
        AlertReceived(message_id=post_id, event_time=opened, status="firing", **alert),  # type: ignore[arg-type]
        CompactedToolResult(thread_ts=thread, message_id=tool_id, event_time=opened + timedelta(seconds=5), round=1,
                            tool_call_id="call_1", tool="query_loki", args={"q": "x"}, raw=loki(30), compact={"n": 1},
                            tokens=5, raw_tokens=50, raw_sha256="0" * 64, compactor_version="t", budget=400),
    ]  # fmt: skip
    if root is not None:
        events.append(
            SlackPostRecorded(thread_ts=thread, message_id=voice_id(post_id, "posted"), post_id=post_id,
                              event_time=opened + timedelta(seconds=1), phase="posted", channel=root[0],
                              slack_ts=f"{thread.split('.')[0]}.000900", root=True, channel_private=root[1])
        )  # fmt: skip
    if committed:
        events.append(RoundCommitted(thread_ts=thread, message_id=message_id(thread, 1, "commit", 0),
                                     event_time=opened + timedelta(seconds=6), round=1, message_ids=[tool_id]))  # fmt: skip
    if text:
        events.append(HumanMessage(thread_ts=thread, message_id=message_id(thread, None, "human", "1"),
                                   event_time=opened + timedelta(minutes=2), user="U9", ts="1", text=text))  # fmt: skip
    return events


@pytest.fixture
def projected(pg_conn: psycopg.Connection, pg_schema: str) -> Iterator[psycopg.Connection]:
    earlier = OPENED - timedelta(minutes=20)
    events = [
        *incident(PUBLIC_PAY, earlier, root=(CHANNEL, False), committed=True, text="payments pods OOM, heap"),
        *incident(
            PRIVATE_PAY, earlier, root=(SECRET, True), committed=True, text="ZEBRA-7731 escalation, heap"
        ),
        *incident(QUERY, OPENED, root=(CHANNEL, False), committed=False),  # round 1 in flight
        *incident(NO_ROOT, OPENED, root=None, committed=False),
    ]
    with pg_conn.transaction():
        result = store.apply_batch(
            pg_conn, [(k, map_event(e)) for k, e in enumerate(events)], group="g", topic="t",
            partitions=[0], next_offsets={0: len(events)}, schema=pg_schema,
        )  # fmt: skip
    assert result.rejections == []
    yield pg_conn


MAPPED = (
    frozenset({CHANNEL, SECRET}),
)  # the operator maps the channels together: only privacy keeps SECRET out


def test_recall_at_open_finds_the_concurrent_incident_by_the_rounds_staged_facts(
    projected: psycopg.Connection,
) -> None:
    found = recall_at_open(projected, QUERY, k=3, groups=MAPPED)
    assert found.channel == CHANNEL  # from the root post: the key names none
    assert [(h.thread, h.kind) for h in found.hits] == [(PUBLIC_PAY, "concurrent")]
    hit = found.hits[0]
    assert hit.link == f"https://slack.com/archives/{CHANNEL}/p1773456870000900"
    assert any("error patterns shared" in r for r in hit.reasons) and all(
        len(r) <= REASON_CHARS for r in hit.reasons
    )


def test_recall_at_open_without_a_known_channel_recalls_nothing(projected: psycopg.Connection) -> None:
    found = recall_at_open(projected, NO_ROOT, k=3, groups=MAPPED)
    assert (found.channel, found.hits) == (None, ())


def test_the_recall_tool_answers_the_threads_own_visible_recall(
    projected: psycopg.Connection, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    projected.commit()
    monkeypatch.setenv("RECALL_CHANNEL_GROUPS", json.dumps([sorted(MAPPED[0])]))
    tool = IncidentRecall(pg_dsn, pg_schema)
    answer = asyncio.run(tool.recall(PUBLIC_PAY, "escalation heap"))
    assert PRIVATE_PAY not in json.dumps(answer) and "ZEBRA" not in json.dumps(answer)
    assert answer["query"] == "escalation heap" and all(h["thread"] != PUBLIC_PAY for h in answer["hits"])
    with pytest.raises(RecallUnavailable, match="no incident profile"):
        asyncio.run(tool.recall("1.000000", "heap"))


def test_the_scope_check_refuses_a_caller_given_channel() -> None:
    scope = Scope(QUERY, None)
    offered = frozenset({"recall_incidents"})
    ok = check_call("recall_incidents", {"query": "heap"}, offered, scope)
    assert ok.refusal is None
    named = check_call("recall_incidents", {"query": "heap", "channel": SECRET}, offered, scope)
    assert named.refusal is not None and "only `query`" in named.refusal
    assert check_call("recall_incidents", {"query": ""}, offered, scope).refusal is not None


def test_a_recorded_recall_is_reused_never_recomputed_and_shown_framed() -> None:
    hit = RecalledIncident(thread=PUBLIC_PAY, kind="concurrent", score_milli=612, reasons=["same <!channel>"])
    row = ContextRow(f"{QUERY}:-:recall:0", "alert", None, {"recall": [hit.model_dump(mode="json")]}, 30)
    alert = ContextRow(f"{QUERY}:-:alert:0", "alert", None, {"alertname": "X"}, 10)
    ctx = LoadedContext(QUERY, (alert, row), None)
    from schemas.events import Wake

    wake = Wake(thread_ts=QUERY, message_id=message_id(QUERY, None, "wake", 0), event_time=OPENED,
                reason="alert", trigger_message_id=alert.id)  # fmt: skip
    step = recall_step(None, ctx, None, wake)  # type: ignore[arg-type]  # no connection: it must not compute
    assert step is not None and asyncio.run(step()) == [hit]
    mention = wake.model_copy(update={"reason": "mention"})
    assert recall_step(None, ctx, None, mention) is None  # type: ignore[arg-type]  # once, at the alert's open
    text = str(row_to_message(row).content)
    assert text.startswith("<data ") and "recall of other incidents" in text and PUBLIC_PAY in text


def test_a_recall_event_maps_to_its_one_row_and_a_misnamed_one_is_refused() -> None:
    event = RecallRecorded(thread_ts=QUERY, message_id=message_id(QUERY, None, "recall", 0), event_time=OPENED,
                           channel=CHANNEL, hits=[])  # fmt: skip
    (op,) = map_event(event)
    assert isinstance(op, Row) and not op.staged  # round NULL: visible at once, outside any round
    assert op.role == "alert" and op.round is None and json.loads(op.content) == {"recall": []}
    bad = event.model_copy(update={"message_id": message_id(QUERY, None, "alert", 1)})
    with pytest.raises(MappingError):
        map_event(bad)
    # the call it was made for is kept beside the model's view: the view and its tokens are unchanged
    made = event.model_copy(update={"made_for": MadeFor(round=1, node="hypothesis")})
    (kept,) = map_event(made)
    assert isinstance(kept, Row) and not kept.staged and kept.tokens == op.tokens
    assert json.loads(kept.content) == {"recall": [], "made_for": {"round": 1, "node": "hypothesis"}}
    assert kept.compact is not None and json.loads(kept.compact) == {"recall": []}
    assert b"made_for" not in event.to_bytes()  # an event without it keeps its bytes


def test_the_first_posts_concurrent_block_links_by_code_and_escapes_the_reasons() -> None:
    from schemas.events import ThreadPost
    from services.voice.blocks import post_blocks

    good = RecalledIncident(
        thread=PUBLIC_PAY,
        kind="concurrent",
        score_milli=612,
        reasons=["same <!channel> & <@U1>"],
        link="https://slack.com/archives/C0INCIDENT/p1",
    )
    forged = RecalledIncident(thread="x|y", kind="concurrent", score_milli=1, link="javascript:alert(1)")
    post = ThreadPost(thread_ts=QUERY, message_id=message_id(QUERY, 1, "post", 0), event_time=OPENED, round=1,
                      kind="questions", text="Before I conclude:\n1. why?", model="m", concurrent=[good, forged])  # fmt: skip
    _, blocks = post_blocks(post)
    text = blocks[1]["text"]["text"]
    assert f"<https://slack.com/archives/C0INCIDENT/p1|{PUBLIC_PAY}>" in text
    assert "same &lt;!channel&gt; &amp; &lt;@U1&gt;" in text and "<!channel>" not in text
    assert "javascript" not in text and "`x|y`" in text
    plain = post.model_copy(update={"concurrent": None})
    assert b"concurrent" not in plain.to_bytes()  # a post without one keeps its bytes


class Sent:
    """The emitter's one method, recording what would go to Kafka."""

    def __init__(self) -> None:
        self.events: list[EventBase] = []

    def send(self, *events: EventBase) -> None:
        self.events.extend(events)


def test_the_step_records_its_result_once_and_nothing_while_the_channel_is_unknown(
    projected: psycopg.Connection,
) -> None:
    from services.agent.recall_step import RecallStep

    sent = Sent()
    unknown = RecallStep(projected, NO_ROOT, sent, MAPPED)  # type: ignore[arg-type]
    assert asyncio.run(unknown()) == [] and sent.events == []  # fails closed: no row, no hit
    known = RecallStep(projected, QUERY, sent, MAPPED)  # type: ignore[arg-type]
    first = asyncio.run(known(MadeFor(round=1, node="hypothesis")))
    assert asyncio.run(known()) == first and len(sent.events) == 1  # computed and recorded once
    (event,) = sent.events
    assert isinstance(event, RecallRecorded) and event.message_id == f"{QUERY}:-:recall:0"
    assert event.made_for == MadeFor(round=1, node="hypothesis")  # the call it joins (issue 38)
    assert event.channel == CHANNEL and [h.thread for h in event.hits] == [PUBLIC_PAY]
