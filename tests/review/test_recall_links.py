"""Recall links on the review page (issue 38 item 4 over issue 37's recall): in the incidents list (the
recorded recall) and on the thread page (live), hidden wherever the thread's channel may not see the hit
(a private incident of another channel) or the page's channel allow-list does not show its channel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import httpx
import psycopg
import pytest
from agent.test_recall_agent import CHANNEL, OPENED, PRIVATE_PAY, PUBLIC_PAY, QUERY, SECRET, incident

from schemas.events import EventBase, RecalledIncident, RecallRecorded
from services.context_render.recall_view import recall_id
from services.projector import store
from services.projector.mapping import map_event

GROUPED, OTHER = "C0GROUPED1", "1773456872.000500"  # public, grouped with CHANNEL by the operator


def _hit(thread: str) -> RecalledIncident:
    return RecalledIncident(thread=thread, kind="concurrent", score_milli=600, reasons=["heap out of memory"])


@pytest.fixture
def recalled(pg_conn: psycopg.Connection, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("RECALL_CHANNEL_GROUPS", json.dumps([[CHANNEL, SECRET, GROUPED]]))
    earlier = OPENED - timedelta(minutes=20)
    events: list[EventBase] = [
        *incident(PUBLIC_PAY, earlier, root=(CHANNEL, False), committed=True, text="payments pods OOM, heap"),
        *incident(PRIVATE_PAY, earlier, root=(SECRET, True), committed=True, text="ZEBRA-7731 escalation, heap"),
        *incident(OTHER, earlier, root=(GROUPED, False), committed=True, text="payments OOM again, heap"),
        *incident(QUERY, OPENED, root=(CHANNEL, False), committed=True),
        # recorded with a hit its channel may not see (a private incident of another channel): a forged or
        # stale record is checked again, never trusted
        RecallRecorded(thread_ts=QUERY, message_id=recall_id(QUERY), event_time=OPENED, channel=CHANNEL,
                       hits=[_hit(PUBLIC_PAY), _hit(PRIVATE_PAY), _hit(OTHER)]),
    ]  # fmt: skip
    with pg_conn.transaction():
        result = store.apply_batch(
            pg_conn, [(k, map_event(e)) for k, e in enumerate(events)], group="g", topic="t",
            partitions=[0], next_offsets={0: len(events)}, schema=pg_schema,
        )  # fmt: skip
    assert result.rejections == []
    yield


def _links(http: httpx.Client) -> tuple[list[str], list[str], str]:
    """(the list's recall links of QUERY, the thread page's, the thread page's HTML)."""
    listed = http.get("/", headers={"Accept": "application/json"}).json()["incidents"]
    (item,) = [i for i in listed if i["thread_ts"] == QUERY]
    page = http.get(f"/threads/{QUERY}", headers={"Accept": "application/json"}).json()
    html = http.get(f"/threads/{QUERY}").text
    return [h["thread"] for h in item["recall"]], [h["thread"] for h in page["recall"]], html


def test_recall_links_show_what_the_channel_may_see_and_nothing_else(
    recalled: None, serve_schema, pg_schema: str
) -> None:
    with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:
        listed, live, html = _links(http)
        index = http.get("/").text
    assert listed == [PUBLIC_PAY, OTHER]  # the recorded private hit is hidden: may_see says no
    assert PUBLIC_PAY in live and OTHER in live and PRIVATE_PAY not in live
    assert f'href="/threads/{PUBLIC_PAY}"' in html and PRIVATE_PAY not in html
    (query_row,) = [tr for tr in index.split("<tr>") if f">{QUERY}</a>" in tr]
    recall_cell = query_row.split('<td class="recall">')[1]
    assert f'href="/threads/{PUBLIC_PAY}"' in recall_cell and f'href="/threads/{OTHER}"' in recall_cell
    assert PRIVATE_PAY not in recall_cell


def test_the_pages_channel_allow_list_hides_links_to_channels_outside_it(
    recalled: None, serve_schema, pg_schema: str
) -> None:
    with serve_schema(pg_schema, frozenset({CHANNEL})) as served, httpx.Client(base_url=served.url) as http:
        listed, live, html = _links(http)
    assert listed == [PUBLIC_PAY] and live == [PUBLIC_PAY]
    assert OTHER not in html and PRIVATE_PAY not in html
