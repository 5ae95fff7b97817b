"""The review page over real Postgres, as its read-only login: answers, JSON, headers, paging, refusals."""

from __future__ import annotations

import json

import httpx
import markupsafe
import psycopg
import pytest

from deploy.local import loopback_http
from deploy.local.pipeline import fresh_schema
from deploy.local.review_threads import (
    PAYLOADS,
    hostile_thread,
    insert_incident,
    insert_row,
    loki_raw,
    long_thread,
)
from services.review.db import Reader
from services.review.web import CSP
from services.runtime.errors import UserFacingError


def test_the_owner_login_is_refused_because_it_could_write(pg_dsn: str, pg_schema: str) -> None:
    with pytest.raises(UserFacingError, match="read-only role"):
        Reader(pg_dsn, pg_schema)


def test_the_review_login_cannot_write_any_table(review_dsn: str, pg_schema: str, owner_conn) -> None:
    hostile_thread(owner_conn)
    reader = Reader(review_dsn, pg_schema)
    try:
        for statement in (
            "INSERT INTO agent_messages (id, thread_ts, role, content, tokens, created_at)"
            " VALUES ('T:1:ai:0', 'T', 'ai', '{}', 0, now())",
            "UPDATE agent_messages SET compact = '{}'",
            "DELETE FROM agent_messages",
            "UPDATE incident_state SET status = 'resolved'",
            "DELETE FROM slack_posts",
            "TRUNCATE agent_messages",
            "CREATE TABLE sneaky (x int)",
        ):
            with reader.connection() as conn, pytest.raises(psycopg.Error) as raised:
                conn.execute(statement)
            assert isinstance(
                raised.value, psycopg.errors.InsufficientPrivilege | psycopg.errors.ReadOnlySqlTransaction
            )
        with reader.connection() as conn:
            assert conn.execute("SELECT count(*) FROM agent_messages").fetchone() == (4,)
    finally:
        reader.close()


def test_every_answer_carries_the_strict_csp_and_json_comes_from_the_same_path(
    serve_schema, pg_schema: str, owner_conn
) -> None:
    ts = hostile_thread(owner_conn)
    with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:
        for path in ("/", f"/threads/{ts}", f"/threads/{ts}/rows/{ts}:1:tools:0", "/static/review.js", "/nope",
                     f"/threads/{ts}/rows/missing"):  # fmt: skip
            answer = http.get(path)
            assert answer.headers["content-security-policy"] == CSP, path
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        page = http.get(f"/threads/{ts}")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        for payload in PAYLOADS:  # every payload reaches the page as text (escaped), never as markup
            assert str(markupsafe.escape(payload)) in page.text
            assert "<" not in payload or payload not in page.text
        as_json = http.get(f"/threads/{ts}", headers={"Accept": "application/json"}).json()
        assert [r["role"] for r in as_json["rows"]] == ["alert", "human", "tool", "post"]
        assert as_json["incident"]["slack_url"] == "https://slack.com/archives/C0EVIL/p1710385200000100"
        post = next(p for p in as_json["posts"] if p["id"] == f"{ts}:1:post:0")
        assert post["records"][0]["slack_url"] is None  # a stored `javascript:` is no link
        assert http.post(f"/threads/{ts}").status_code == 405
        assert http.get("/threads/none", headers={"Accept": "application/json"}).status_code == 404


def test_the_raw_is_paged_and_a_pattern_leads_to_its_lines(serve_schema, pg_schema: str, owner_conn) -> None:
    ts = long_thread(owner_conn, "1710000000.000001", messages=3, loki_lines=1000)
    row = f"/threads/{ts}/rows/{ts}:1:tools:0"
    json_accept = {"Accept": "application/json"}
    with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:
        first = http.get(row, headers=json_accept).json()
        assert first["raw"]["total"] == 1000 and len(first["raw"]["lines"]) == first["page_lines"] == 200
        assert (
            first["raw"]["lines"][0]["n"] == 0
            and first["row"]["raw_tokens"] > 10 * first["row"]["context_tokens"]
        )
        last = http.get(row, params={"offset": 900}, headers=json_accept).json()
        assert [line["n"] for line in last["raw"]["lines"]] == list(range(900, 1000))
        traced = http.get(row, params={"pattern": "0"}, headers=json_accept).json()["pattern"]
        assert (traced["stated"], traced["found"], traced["agrees"]) == (1000, 1000, True)
        assert len(traced["lines"]) == 200 and traced["unassigned"] == 0


def test_the_channel_allow_list_hides_other_channels(serve_schema, pg_schema: str, owner_conn) -> None:
    ts = hostile_thread(owner_conn)
    other = long_thread(owner_conn, "1710000000.000002", messages=2)
    with serve_schema(pg_schema, frozenset({"C0LONG"})) as served, httpx.Client(base_url=served.url) as http:
        listed = http.get("/", headers={"Accept": "application/json"}).json()["incidents"]
        assert [i["thread_ts"] for i in listed] == [other]
        assert http.get(f"/threads/{ts}").status_code == 404
        assert http.get(f"/threads/{ts}/rows/{ts}:1:tools:0").status_code == 404
        assert http.get(f"/threads/{other}").status_code == 200


def test_the_incident_list_filters_and_searches(serve_schema, pg_schema: str, owner_conn) -> None:
    hostile_thread(owner_conn)
    a = long_thread(owner_conn, "1710000000.000003", messages=4)
    with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:

        def keys(**params: str) -> list[str]:
            got = http.get("/", params=params, headers={"Accept": "application/json"}).json()
            return [i["thread_ts"] for i in got["incidents"]]

        assert len(keys()) == 2
        assert keys(channel="C0LONG") == [a] == keys(alert="HighErrorRate") == keys(q="pod checkout-3")
        assert keys(date="2026-03-14") == keys() and keys(date="2020-01-01") == []
        assert keys(state="resolved") == []
        listed = http.get("/", headers={"Accept": "application/json"}).json()
        assert "C0EVIL" in listed["options"]["channel"]
        for item in listed["incidents"]:  # raw and in-context tokens: the thread page's totals
            totals = http.get(f"/threads/{item['thread_ts']}", headers={"Accept": "application/json"}).json()
            assert (item["raw_tokens"], item["context_tokens"]) == (
                totals["totals"]["raw_tokens"],
                totals["totals"]["context_tokens"],
            )
            assert item["raw_tokens"] > 0


def test_the_raw_view_shows_the_redactors_markers_unless_the_operator_turns_them_off(
    serve_schema, pg_schema: str, owner_conn
) -> None:
    ts = "1710000000.000009"
    insert_incident(owner_conn, ts, "checkout", "C0SECRET")
    raw = loki_raw([("2026-03-14T03:00:00Z", "db connect password=hunter2 user=app failed")])
    insert_row(
        owner_conn, f"{ts}:1:tools:0", ts, 1, "tool", raw, {"patterns": ["1× db connect failed"]}, "call_1"
    )
    row = f"/threads/{ts}/rows/{ts}:1:tools:0"
    with serve_schema(pg_schema) as served:
        shown = loopback_http.get(served.url + row).text
    assert "hunter2" not in shown and "password=[REDACTED:password]" in shown
    with serve_schema(pg_schema, redact=False) as served:
        assert "password=hunter2" in loopback_http.get(served.url + row).text


def test_a_rederivations_diff_shows_lost_facts_and_both_compacts(
    serve_schema, pg_dsn: str, pg_schema: str, owner_conn
) -> None:
    ts = "1710000000.000010"
    old = {"patterns": ["198× 03:12:44–03:14:01 FATAL ERROR: JS heap out of memory"], "summary": "412 lines"}
    new = {"patterns": ["FATAL ERROR: JS heap out of memory"], "summary": "412 lines"}
    insert_incident(owner_conn, ts, "checkout", "C0DIFF")
    insert_row(owner_conn, f"{ts}:1:tools:0", ts, 1, "tool", {"raw": 1}, old, "call_1")
    with fresh_schema(pg_dsn) as after:
        with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={after}") as conn:
            insert_row(conn, f"{ts}:1:tools:0", ts, 1, "tool", {"raw": 1}, new, "call_1")
        with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:
            got = http.get(f"/diff/{after}", headers={"Accept": "application/json"}).json()
            page = http.get(f"/diff/{after}").text
            assert http.get("/diff/no_such_schema").status_code == 404
            assert http.get("/diff/Robert'); DROP").status_code == 404
        with serve_schema(pg_schema, frozenset({"C0DIFF"})) as served:
            assert loopback_http.get(f"{served.url}/diff/{after}").status_code == 404
    assert got["changed"] == 1 and got["total"]["lost_fact_count"] >= 1
    (pair,) = got["pairs"]
    assert "198×" in pair["before"] and "198×" not in pair["after"]
    assert any("198" in lost for lost in pair["lost"])
    assert str(markupsafe.escape(pair["before"])) in page and str(markupsafe.escape(pair["after"])) in page


def _drill(
    serve_schema, pg_schema: str, owner_conn, ts: str, tool: str, raw: object, compact: dict
) -> tuple[dict, dict, str]:
    """A tool row written with `compact` (also the digest as first written), then its first two items
    drilled into: their JSON views and the HTML page of the first."""
    insert_row(owner_conn, f"{ts}:1:tools:0", ts, 1, "tool", raw, compact, "call_1")
    owner_conn.execute(
        "INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens,"
        " created_at) VALUES (%s, %s, 'h', %s, 'call_1', %s, 1, now())",
        (ts, tool, f"{ts}:1:tools:0", json.dumps(compact)),
    )
    row = f"/threads/{ts}/rows/{ts}:1:tools:0"
    json_accept = {"Accept": "application/json"}
    with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:
        first, second = (
            http.get(row, params={"pattern": k}, headers=json_accept).json()["pattern"] for k in "01"
        )
        return first, second, http.get(row, params={"pattern": "0"}).text


def test_a_pod_events_group_leads_to_the_events_it_sums(serve_schema, pg_schema: str, owner_conn) -> None:
    ts = "1710000000.000011"
    insert_incident(owner_conn, ts, "checkout", "C0PODS")
    item = {
        "type": "Warning",
        "reason": "BackOff",
        "message": "Back-off restarting",
        "involvedObject": {"name": "p"},
    }
    raw = {
        "kind": "EventList",
        "items": [{**item, "count": 10}, {**item, "count": 5}, {**item, "reason": "Unhealthy"}],
    }
    compact = {"events": ["15× 03:13:30–03:14:04 Warning BackOff 1 pod", "1× Warning Unhealthy 1 pod"]}
    got, other, _page = _drill(serve_schema, pg_schema, owner_conn, ts, "get_pod_events", raw, compact)
    assert (got["stated"], got["found"], got["events"], got["agrees"]) == (15, 15, 2, True)
    assert [line["n"] for line in got["lines"]] == [0, 1]
    assert (other["found"], other["agrees"]) == (1, True)


def test_a_prometheus_series_line_leads_to_the_samples_of_each_trend_segment(
    serve_schema, pg_schema: str, owner_conn
) -> None:
    """Issue 38 item 3: a trend segment (`rising ... from 03:02:00`) is traced to the points behind it."""
    ts = "1710000000.000012"
    insert_incident(owner_conn, ts, "checkout", "C0PROM")
    start = 1773457200  # 2026-03-14 03:00:00Z
    flat_then_rising = [[start + 60 * i, str(100 if i < 2 else 100 + 50 * (i - 1))] for i in range(5)]
    raw = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"pod": "a-1"}, "values": flat_then_rising},
                {"metric": {"pod": "b-1"}, "values": [[start, "1"], [start + 60, "1"]]},
                {"metric": {"pod": "b-2"}, "values": [[start, "2"]]},
            ],
        },
    }
    compact = {
        "series": [
            "{pod=a-1}: max=last 250; flat ~100, then rising ~50/min from 03:02:00",
            "2 series {pod=b-*}: 1..2",
        ]
    }
    one, group, page = _drill(serve_schema, pg_schema, owner_conn, ts, "query_prometheus", raw, compact)
    assert (one["stated"], one["found"], one["listed"], one["agrees"]) == (1, 1, 5, True)
    flat, rising = one["segments"]
    assert (flat["label"], flat["points"], flat["min"], flat["max"]) == ("start", 2, 100, 100)
    assert (rising["label"], rising["points"], rising["first"], rising["last"]) == (
        "from 03:02:00",
        3,
        "150",
        "250",
    )
    assert [line["ts"] for line in one["lines"]] == [
        "03:00:00",
        "03:01:00",
        "03:02:00",
        "03:03:00",
        "03:04:00",
    ]
    assert (group["stated"], group["found"], group["listed"], group["agrees"]) == (2, 2, 3, True)
    assert "from 03:02:00" in page and 'id="segments"' in page


def _span(span_id: str, name: str, code: int, message: str = "", ms: int = 10) -> dict:
    return {"spanId": span_id, "name": name, "startTimeUnixNano": "1773457200000000000",
            "endTimeUnixNano": str(1773457200000000000 + ms * 1_000_000),
            "status": {"code": code, "message": message}}  # fmt: skip


def test_a_tempo_error_group_leads_to_its_spans(serve_schema, pg_schema: str, owner_conn) -> None:
    """Issue 38 item 3: an error group of a trace's compact is traced to the spans it counts."""
    ts = "1710000000.000013"
    insert_incident(owner_conn, ts, "checkout", "C0TEMPO")
    spans = [
        _span("a1", "payment.charge", 2, "upstream timeout", 101),
        _span("a2", "payment.charge", 2, "upstream timeout", 140),
        _span("a3", "payment.charge", 2, "card declined"),
        _span("a4", "payment.charge", 0),
    ]
    batch = {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "checkout-api"}}]},
             "scopeSpans": [{"spans": spans}]}  # fmt: skip
    raw = {"batches": [batch]}
    compact = {
        "groups": [
            '2× 03:00:00.000 checkout-api payment.charge ERROR "upstream timeout" 101..140ms',
            '1× checkout-api payment.charge ERROR "card declined" 10ms',
        ]
    }
    first, second, page = _drill(serve_schema, pg_schema, owner_conn, ts, "query_tempo", raw, compact)
    assert (first["stated"], first["found"], first["agrees"]) == (2, 2, True)
    assert [line["ts"] for line in first["lines"]] == ["101.0ms", "140.0ms"]
    assert (second["stated"], second["found"], second["agrees"]) == (1, 1, True)
    assert "Error groups → their spans" in page and "span a1" in page


def test_a_row_re_rendered_twice_shows_each_rendering_in_order(
    serve_schema, pg_schema: str, owner_conn
) -> None:
    """Issue 38 item 2: each rendering a row had, in order (rendering_history, migration 011), the one
    between the first and the current included."""
    ts = "1710000000.000014"
    insert_incident(owner_conn, ts, "checkout", "C0RR")
    row_id = f"{ts}:1:tools:0"
    digest = {"summary": "1,000 lines"}
    headline = {"re_rendered": "headline", "headline": "h"}
    line = {"re_rendered": "one_line", "line": "l"}
    insert_row(owner_conn, row_id, ts, 1, "tool", {"raw": 1}, line, "call_1")
    owner_conn.execute(
        "INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens,"
        " created_at) VALUES (%s, 'query_loki', 'h', %s, 'call_1', %s, 7, now())",
        (ts, row_id, json.dumps(digest)),
    )
    for made, policy, compact, tokens in ((2, "headline", headline, 5), (3, "one_line", line, 3)):
        owner_conn.execute(
            "INSERT INTO rendering_history (event_id, thread_ts, target_id, made_round, policy, compact, tokens)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (f"{ts}:-:rerender:r{made}-1-tools-0", ts, row_id, made, policy, json.dumps(compact), tokens),
        )
    with serve_schema(pg_schema) as served, httpx.Client(base_url=served.url) as http:
        thread = http.get(f"/threads/{ts}", headers={"Accept": "application/json"}).json()
        one = http.get(f"/threads/{ts}/rows/{row_id}", headers={"Accept": "application/json"}).json()
    shown = next(r for r in thread["rows"] if r["id"] == row_id)
    assert [(x["label"], x["tokens"]) for x in shown["renderings"]] == [
        ("written", 7), ("headline, for round 2", 5), ("one_line, for round 3", 3),
    ]  # fmt: skip
    assert [x["value"] for x in one["renderings"]] == [digest, headline, line]
