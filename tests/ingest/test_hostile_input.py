"""Issue 17: input can never produce a 5xx. What ingest can never accept is a 4xx with its reason,
counted by status; a 5xx means only "the broker did not ack, retry".

The server runs with its broker down: any input that got as far as producing would be answered 503,
so every assertion of a 4xx below also proves nothing was produced."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.local import loopback_http
from schemas import topics
from services.ingest.alerts import parse_time
from services.ingest.dedupe import MAX_KEY_CHARS, TtlSet
from services.ingest.rejections import Rejected

from .helpers import (
    CLOSED_PORT_BOOTSTRAP,
    TOKEN,
    RunningServer,
    alert_payload,
    config,
    envelope,
    message,
    signed_headers,
    slack_ts,
    start_server,
)

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    running = start_server(config(CLOSED_PORT_BOOTSTRAP, ack_timeout_s=0.3, flush_timeout_s=0.3))
    yield running
    running.stop()


def _alert(**first: Any) -> dict[str, Any]:
    payload = alert_payload()
    payload["alerts"][0].update(first)
    return payload


def _raw_alert(replace: str, by: str) -> bytes:
    """An alert body with `replace` swapped for `by` in its JSON text (for what json.dumps cannot write)."""
    text = json.dumps(alert_payload())
    assert replace in text
    return text.replace(replace, by, 1).encode()


ALERT_CASES: dict[str, tuple[bytes, int, str]] = {
    "startsAt year 1 with an offset": (
        json.dumps(_alert(startsAt="0001-01-01T00:00:00+05:00")).encode(), 400, "bad_field"),
    "startsAt year 9999 with an offset": (
        json.dumps(_alert(startsAt="9999-12-31T23:59:59-05:00")).encode(), 400, "bad_field"),
    "startsAt before 1970": (json.dumps(_alert(startsAt="1969-12-31T23:59:59Z")).encode(), 400, "bad_field"),
    "offset +99:99": (json.dumps(_alert(startsAt="2026-03-14T09:00:00+99:99")).encode(), 400, "bad_field"),
    "a 5000-digit integer": (_raw_alert('"a1b2c3d4e5f60718"', "9" * 5000), 400, "malformed_json"),
    "a lone surrogate": (_raw_alert('"HighErrorRate"', '"\\ud800"'), 400, "malformed_json"),
    "nesting 900 deep": (_raw_alert('"truncatedAlerts": 0', '"x": ' + "[" * 900 + "]" * 900), 400,
                         "malformed_json"),
    "NaN": (_raw_alert('"truncatedAlerts": 0', '"truncatedAlerts": NaN'), 400, "malformed_json"),
    "1e999": (_raw_alert('"truncatedAlerts": 0', '"truncatedAlerts": 1e999'), 400, "malformed_json"),
    "not UTF-8": (json.dumps(alert_payload()).encode().replace(b"HighErrorRate", b"High\xffRate", 1), 400,
                  "malformed_json"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ALERT_CASES))
def test_hostile_alerts_are_a_4xx_with_their_reason(server: RunningServer, name: str) -> None:
    body, status, error = ALERT_CASES[name]
    response = loopback_http.post(f"{server.url}/alertmanager", content=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert response.json()["error"] == error
    assert server.metric("ingest_requests_total", endpoint="alertmanager", status=str(status)) >= 1


def _slack(text: str = "x", **envelope_fields: Any) -> bytes:
    payload = envelope(message(slack_ts(), slack_ts(1), text))
    payload.update(envelope_fields)
    return json.dumps(payload).encode()


SLACK_CASES: dict[str, tuple[bytes, int, str]] = {
    "a 5000-digit integer": (
        _slack(event_time=12345).replace(b"12345", b"9" * 5000, 1),
        400,
        "malformed_json",
    ),
    "a lone surrogate": (_slack("\ud800"), 400, "malformed_json"),
    "nesting 600 deep": (_slack(blocks=json.loads("[" * 600 + "]" * 600)), 400, "malformed_json"),
}


@pytest.mark.parametrize("name", sorted(SLACK_CASES))
def test_hostile_signed_slack_bodies_are_a_4xx(server: RunningServer, name: str) -> None:
    body, status, error = SLACK_CASES[name]
    response = loopback_http.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body))
    assert response.status_code == status, response.text
    assert response.json()["error"] == error


def test_an_event_too_large_for_the_topic_is_413_not_503(server: RunningServer) -> None:
    """The body fits the limit but its event would not (a label copied into the event beside the
    payload): a permanent 413, never the 503 that Alertmanager would retry forever."""
    big = "x" * 600_000
    payload = _alert()
    payload["commonLabels"]["alertname"] = big
    body = json.dumps(payload).encode()
    assert len(body) <= topics.MAX_EVENT_BYTES
    response = loopback_http.post(f"{server.url}/alertmanager", content=body, headers=AUTH)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "event_too_large"
    over = json.dumps(_alert(annotations={"d": "y" * topics.MAX_EVENT_BYTES})).encode()
    response = loopback_http.post(f"{server.url}/alertmanager", content=over, headers=AUTH)
    assert (response.status_code, response.json()["error"]) == (413, "body_too_large")


def test_one_size_end_to_end() -> None:
    """The HTTP body limit, the largest event, the producer's and the topics' limits are one setting."""
    from services.ingest.config import MAX_BODY_BYTES

    assert MAX_BODY_BYTES == topics.MAX_EVENT_BYTES
    spec = {s.name: s for s in topics.TOPICS}
    for name in (topics.EVENTS, topics.WAKE):
        assert (
            int(spec[name].config["max.message.bytes"]) == topics.EVENT_RECORD_LIMIT > topics.MAX_EVENT_BYTES
        )


@pytest.mark.slow
def test_metric_labels_stay_a_closed_set(server: RunningServer) -> None:
    """5,000 made-up event types used to grow /metrics by 1.3 MB: one label value per type."""
    before = len(loopback_http.get(f"{server.url}/metrics").content)
    for i in range(300):
        event = message(slack_ts(), slack_ts(1), "x")
        event["type"] = f"made_up_{i}"
        body = json.dumps(envelope(event)).encode()
        assert (
            loopback_http.post(
                f"{server.url}/slack/events", content=body, headers=signed_headers(body)
            ).status_code
            == 200
        )
    text = loopback_http.get(f"{server.url}/metrics").text
    assert "made_up_" not in text
    assert server.metric("ingest_ignored_total", reason="event_type_not_handled") >= 300
    assert len(text.encode()) - before < 2_000


def test_the_dedupe_cache_is_bounded_in_bytes() -> None:
    """200 retries with 900 KB event ids took RSS from 75 to 252 MB: long keys are kept as digests."""
    seen = TtlSet(3600, 1000)
    keys = [f"{i:04d}" + "E" * 900_000 for i in range(50)]
    for key in keys:
        seen.add(key)
    assert all(key in seen for key in keys) and f"{0:04d}" + "E" * 899_999 not in seen
    stored = sum(sys.getsizeof(k) for k in seen._seen)
    assert stored < 50 * 200 and all(len(k) <= max(MAX_KEY_CHARS, 71) for k in seen._seen)


@pytest.mark.parametrize(
    "value",
    [
        "2026-03-14T09:00:00+99:99",
        "2026-03-14T09:00:00+24:00",
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-05:00",
        "1969-12-31T23:59:59Z",
        "2026-02-30T00:00:00Z",
        "２０２６-03-14T09:00:00Z",
    ],
)
def test_alert_times_are_refused_never_shifted(value: str) -> None:
    with pytest.raises(Rejected) as refused:
        parse_time(value, "alerts[0].startsAt")
    assert refused.value.status == 400 and "startsAt" in refused.value.detail


def test_alert_times_in_range_convert_exactly() -> None:
    assert parse_time("2026-03-14T09:00:00.5+05:30", "t").isoformat() == "2026-03-14T03:30:00.500000+00:00"
    assert parse_time("1970-01-01T00:00:00Z", "t").timestamp() == 0


# --- fuzz: JSON trees with extreme values, never a 5xx ----------------------------------------------

EXTREME_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**1200), max_value=10**1200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec="utf-8"), max_size=20),
    st.text(
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2
    ),  # lone surrogates
    st.sampled_from(
        ["²", "١٢٣", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-23:59", "+99:99", "1e999"]
    ),
)
EXTREME_JSON = st.recursive(
    EXTREME_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
DEEP = st.integers(min_value=1, max_value=1500).map(lambda n: "[" * n + "]" * n)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _text(value: Any) -> str:
    return json.dumps(value)  # writes NaN, Infinity and \udXXX escapes: what a hostile sender sends


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_fuzz_alerts_with_extreme_values_never_give_a_5xx(server: RunningServer, data: st.DataObject) -> None:
    payload = alert_payload()
    target = data.draw(st.sampled_from(["alerts0", "labels", "top", "deep"]))
    if target == "alerts0":
        payload["alerts"][0][data.draw(st.sampled_from(["startsAt", "endsAt", "labels", "fingerprint"]))] = (
            data.draw(EXTREME_JSON)
        )
    elif target == "labels":
        payload["commonLabels"][data.draw(st.text(max_size=5))] = data.draw(EXTREME_JSON)
    elif target == "top":
        payload[data.draw(st.sampled_from(["version", "groupKey", "status", "alerts", "x"]))] = data.draw(
            EXTREME_JSON
        )
    body = _text(payload)
    if target == "deep":
        body = body.replace('"truncatedAlerts": 0', '"truncatedAlerts": ' + data.draw(DEEP), 1)
    response = loopback_http.post(f"{server.url}/alertmanager", content=body.encode(), headers=AUTH)
    # 503 only for what was accepted: it reached the (down) broker. Never a 500.
    assert response.status_code != 500 and response.status_code < 504, (response.status_code, response.text)
    assert isinstance(response.json().get("error", ""), str)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_fuzz_signed_slack_bodies_with_extreme_values_never_give_a_5xx(
    server: RunningServer, data: st.DataObject
) -> None:
    event = message(slack_ts(), slack_ts(1), "x")
    event[data.draw(st.sampled_from(sorted(event)))] = data.draw(EXTREME_JSON)
    payload = envelope(event)
    if data.draw(st.booleans()):
        payload[data.draw(st.sampled_from(["event_id", "event_time", "type", "team_id"]))] = data.draw(
            EXTREME_JSON
        )
    body = _text(payload).encode()
    response = loopback_http.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body))
    assert response.status_code != 500 and response.status_code < 504, (response.status_code, response.text)


@pytest.mark.slow
@FUZZ
@given(body=st.binary(max_size=512))
def test_fuzz_raw_bytes_never_give_a_5xx(server: RunningServer, body: bytes) -> None:
    for path, headers in (("/alertmanager", AUTH), ("/slack/events", signed_headers(body))):
        response = loopback_http.post(f"{server.url}{path}", content=body, headers=headers)
        assert 400 <= response.status_code < 500, (path, response.status_code, response.text)
        assert re.match(r"^[a-z_]+$", response.json()["error"])
