"""Hostile input at `incident-memory compact` (issue 17, item 6), and the same raws on the stream.

The contract: input the command cannot accept exits 2 with exactly one line on stderr, starting
`incident-memory compact:` and naming the problem; never a traceback, never nonsense accepted. The
compactor stream dead-letters the same raw with the same reason (`stream.process`, no Kafka here).
A hypothesis test holds the command's pure core (`compact_stdin`) to it on many more inputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from schemas.events import ToolResult
from services.compactor.cli import compact_stdin
from services.compactor.stream import Dead, process
from services.runtime.errors import BadInput

PREFIX = "incident-memory compact: "
OUTSIDE = "is outside 1970-01-01..9999-12-31"


def loki(ts: Any) -> Any:
    stream = {"stream": {"app": "x"}, "values": [["1773457200000000000", "GET / 200"], [ts, "GET / 500"]]}
    return {"status": "success", "data": {"resultType": "streams", "result": [stream]}}


def loki_entries(ts: Any) -> Any:
    return [{"timestamp": ts, "line": "GET / 500", "labels": {"app": "x"}}]


def prometheus(ts: Any, value: str = "1") -> Any:
    series = {"metric": {"__name__": "up"}, "values": [[1773457200, "1"], [ts, value]]}
    return {"status": "success", "data": {"resultType": "matrix", "result": [series]}}


def tempo(start: Any) -> Any:
    span = {
        "spanId": "a",
        "name": "GET /",
        "startTimeUnixNano": start,
        "endTimeUnixNano": "1773457200000000000",
    }
    return {"batches": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}


def pod_events(**times: Any) -> Any:
    return {"kind": "EventList", "items": [{"reason": "BackOff", "count": 2, "message": "back-off", **times}]}


def js(raw: Any) -> bytes:
    return json.dumps(raw).encode()


# (id, tool, stdin, what the one line must say)
CASES: list[tuple[str, str, bytes, str]] = [
    # decoding: schemas.strict_json
    (
        "nesting_100k_arrays",
        "query_loki",
        b"[" * 100_000 + b"]" * 100_000,
        "stdin: nesting deeper than 256 at",
    ),
    ("nesting_100k_objects", "query_loki", b'{"a":' * 100_000, "stdin: nesting deeper than 256 at"),
    (
        "int_5000_digits",
        "query_loki",
        b'{"n":' + b"9" * 5000 + b"}",
        "an integer of 5000 digits (at most 1000) at $.n",
    ),
    (
        "non_utf8",
        "query_loki",
        b'{"data":"\xff\xfe"}',
        "stdin: not UTF-8: invalid start byte (byte 0xff) at byte 9",
    ),
    ("utf8_encoded_surrogate", "query_loki", b'{"a":"\xed\xa0\x80"}', "stdin: not UTF-8"),
    (
        "lone_surrogate",
        "query_loki",
        b'{"data":{"x":"\\ud800"}}',
        "a lone surrogate \\ud800 in a string at $.data.x",
    ),
    (
        "nan",
        "query_prometheus",
        b'{"data":{"result":[NaN]}}',
        "NaN is not JSON (no NaN or Infinity) at $.data.result[0]",
    ),
    ("infinity", "x", b"[Infinity]", "Infinity is not JSON"),
    ("float_overflow", "x", b'{"v":1e999}', "1e999 overflows a float at $.v"),
    ("empty", "x", b"", "stdin: not JSON: Expecting value at line 1 column 1 (char 0)"),
    # times: services.compaction.timefmt, one parser per raw format
    ("loki_ns_1e29", "query_loki", js(loki(str(10**29))), f"'100000000000000000000000000000' {OUTSIDE}"),
    ("loki_ns_minus_1e30", "query_loki", js(loki(-(10**30))), f"-1000000000000000000000000000000 {OUTSIDE}"),
    ("loki_ns_negative", "query_loki", js(loki(-1)), f"timestamp -1 {OUTSIDE}"),
    ("loki_ns_5000_digits", "query_loki", js(loki("9" * 5000)), OUTSIDE),
    ("loki_ns_superscript", "query_loki", js(loki("²")), "timestamp '²' is not integer nanoseconds"),
    ("loki_ns_arabic_digits", "query_loki", js(loki("١٧٧٣٤٥٧٢٠٠")), "is not integer nanoseconds"),
    ("loki_ns_true", "query_loki", js(loki(True)), "timestamp True is not integer nanoseconds"),
    (
        "loki_entry_superscript",
        "query_loki_logs",
        js(loki_entries("²")),
        "entry 0 timestamp '²' is not integer",
    ),
    (
        "loki_entry_year_10000",
        "query_loki_logs",
        js(loki_entries("10000-01-01T00:00:00Z")),
        "not an RFC 3339 time",
    ),
    (
        "loki_entry_year_0",
        "query_loki_logs",
        js(loki_entries("0000-12-31T23:59:59Z")),
        "not a valid date and time",
    ),
    ("loki_entry_year_1", "query_loki_logs", js(loki_entries("0001-01-01T05:00:00Z")), OUTSIDE),
    ("loki_entry_before_year_1", "query_loki_logs", js(loki_entries("0001-01-01T00:00:00+05:00")), OUTSIDE),
    (
        "loki_entry_offset_99",
        "query_loki_logs",
        js(loki_entries("2026-03-14T03:12:44+99:99")),
        "offset out of range",
    ),
    ("prometheus_1969", "query_prometheus", js(prometheus(-1)), f"series 0 sample 1 timestamp -1 {OUTSIDE}"),
    ("prometheus_1811", "query_prometheus", js(prometheus(-5_000_000_000)), OUTSIDE),
    ("prometheus_1e29", "query_prometheus", js(prometheus(10**29)), OUTSIDE),
    ("prometheus_1e400_int", "query_prometheus", js(prometheus(10**400)), OUTSIDE),
    ("prometheus_year_10000", "query_prometheus", js(prometheus(253_402_300_800)), OUTSIDE),
    ("prometheus_true", "query_prometheus", js(prometheus(True)), "timestamp True is not unix seconds"),
    ("prometheus_superscript", "query_prometheus", js(prometheus("²")), "timestamp '²' is not unix seconds"),
    (
        "prometheus_value_arabic",
        "query_prometheus",
        js(prometheus(1773457215, "١٢")),
        "value '١٢' is not a number",
    ),
    ("tempo_1e29", "query_tempo", js(tempo(str(10**29))), OUTSIDE),
    ("tempo_minus_1e30", "query_tempo", js(tempo(-(10**30))), OUTSIDE),
    ("tempo_true", "query_tempo", js(tempo(True)), "time True is not integer nanoseconds"),
    ("tempo_superscript", "query_tempo", js(tempo("²")), "time '²' is not integer nanoseconds"),
    (
        "events_year_1",
        "get_pod_events",
        js(pod_events(eventTime="0001-01-01T05:00:00Z")),
        f"eventTime '0001-01-01T05:00:00Z' {OUTSIDE}",
    ),
    (
        "events_year_10000",
        "get_pod_events",
        js(pod_events(lastTimestamp="9999-12-31T23:59:59-14:00")),
        OUTSIDE,
    ),
    (
        "events_offset_99",
        "get_pod_events",
        js(pod_events(firstTimestamp="2026-03-14T03:12:44+99:99")),
        "offset out of range",
    ),
    (
        "events_not_a_time",
        "get_pod_events",
        js(pod_events(firstTimestamp="yesterday")),
        "is not an RFC 3339 time",
    ),
]
# What must still work at the edges of the same rules.
ACCEPTED: list[tuple[str, str, bytes]] = [
    ("nesting_256", "x", b"[" * 256 + b"]" * 256),
    ("int_1000_digits", "x", b"[" + b"9" * 1000 + b"]"),
    ("escaped_surrogate_pair", "x", b'["\\ud83d\\ude00"]'),
    ("loki_last_ns_of_9999", "query_loki", js(loki("253402300799999999999"))),
    ("loki_entry_rfc3339_ns", "query_loki_logs", js(loki_entries("2026-03-14T03:12:44.123456789+01:00"))),
    ("prometheus_epoch", "query_prometheus", js(prometheus(0))),
    ("events_go_zero_time_is_unset", "get_pod_events", js(pod_events(eventTime="0001-01-01T00:00:00Z"))),
]


def _run(tool: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", "compact", "--tool", tool],
        input=stdin,
        capture_output=True,
        timeout=60,
    )


@cache
def _results() -> dict[str, subprocess.CompletedProcess[bytes]]:
    """Every case's process, run a few at a time (each is a fresh interpreter)."""
    runs = [(case_id, tool, stdin) for case_id, tool, stdin, _ in CASES] + ACCEPTED
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda r: (r[0], _run(r[1], r[2])), runs)
        return dict(done)


@pytest.mark.slow
@pytest.mark.parametrize(("case_id", "tool", "stdin", "says"), CASES, ids=[c[0] for c in CASES])
def test_refused_with_one_line_and_exit_2(case_id: str, tool: str, stdin: bytes, says: str) -> None:
    proc = _results()[case_id]
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == 2, err
    assert proc.stdout == b""
    assert err.endswith("\n") and len(err.splitlines()) == 1, err
    assert err.startswith(PREFIX) and "Traceback" not in err
    assert says in err, err
    assert len(err) < 400


@pytest.mark.slow
@pytest.mark.parametrize(("case_id", "tool", "stdin"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_still_accepted(case_id: str, tool: str, stdin: bytes) -> None:
    proc = _results()[case_id]
    assert proc.returncode == 0, proc.stderr.decode()
    assert set(json.loads(proc.stdout)) == {"tool", "compact", "tokens"}


@pytest.mark.slow
def test_year_one_and_negative_times_never_render() -> None:
    """What the issue saw printed (`1-01-01T05:00:00Z`, 1811, 1969) cannot be printed any more."""
    for case_id, *_ in CASES:
        out = _results()[case_id].stdout.decode()
        assert "1-01-01T" not in out and "1811-" not in out and "1969-" not in out


# --- the stream: the same raws, dead-lettered with the same reasons ---------------------------------

_NOW = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
_TS = "1773458400.000100"
_PLACEHOLDER = b'"RAW-PLACEHOLDER"'


def _event_bytes(tool: str, raw: bytes) -> bytes:
    event = ToolResult(
        thread_ts=_TS,
        message_id=f"{_TS}:1:tools:0",
        event_time=_NOW,
        round=1,
        tool_call_id="call_0",
        tool=tool,
        args={},
        raw="RAW-PLACEHOLDER",
        alert_context={"service": "checkout-api"},
    )
    value = event.to_bytes()
    assert value.count(_PLACEHOLDER) == 1
    return value.replace(_PLACEHOLDER, raw)


@pytest.mark.slow
@pytest.mark.parametrize(("case_id", "tool", "stdin", "says"), CASES, ids=[c[0] for c in CASES])
def test_the_stream_dead_letters_the_same_raw_for_the_same_reason(
    case_id: str, tool: str, stdin: bytes, says: str
) -> None:
    if not stdin:
        pytest.skip("an empty raw is not a tool result: the event itself would be incomplete")
    result = process(
        _event_bytes(tool, stdin), key=None, topic="in", partition=0, offset=7, recorded=lambda _k: None
    )
    assert isinstance(result, Dead)
    reason = result.letter.reason
    cli = _results()[case_id].stderr.decode().strip().removeprefix(PREFIX)
    if cli.startswith("stdin: "):  # decoding: the raw sits at `$.raw` of the event, one level down
        expected = cli.removeprefix("stdin: ").replace(" at $", " at $.raw")
        expected = expected.replace("deeper than 256", "deeper than 257")
        if " at $" in expected:
            assert reason == expected
        else:  # a byte or char offset: the problem is the same, the offset is the event's
            assert reason.split(" at ")[0] == expected.split(" at ")[0]
    else:  # a format's reason: word for word what the command says
        assert reason == f"raw format: {cli}"
        assert result.answer is not None  # and the agent waiting for the digest gets the error


@pytest.mark.parametrize(
    "raw", [b'{"x":"\\ud800"}', b'{"x":NaN}', b"[" * 300 + b"]" * 300, b"[" + b"1" * 2000 + b"]"]
)
def test_a_refused_raw_still_answers_the_agent(raw: bytes) -> None:
    """Refused by the strict rules but readable by plain json: the waiting agent gets an error digest."""
    result = process(
        _event_bytes("query_loki", raw), key=None, topic="in", partition=0, offset=7, recorded=lambda _k: None
    )
    assert isinstance(result, Dead) and result.answer is not None
    answer = json.loads(result.answer)
    assert answer["compact"]["error"].startswith("could not be compacted: ")
    assert answer["raw"] == {"not_kept": "the raw stays on in partition 0 offset 7"}


# --- the command's pure core under hypothesis ------------------------------------------------------

_ODD_DIGITS = "0123456789²³¹١٢٣٤٥٦٧٨٩０１２３۰۱߀०০੦୦௦౦೦൦๐໐༠၀႐០᠐"
_TIMES = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=0, max_value=253_402_300_799_999_999_999),
    st.sampled_from([True, False, None, 0, -1, 1.5, -0.0, 10**400, 253_402_300_800, "", " 1", "1_0", "+1"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=0, max_value=2.6e11),
    st.text(alphabet=_ODD_DIGITS, min_size=1, max_size=22),
    st.text(alphabet=_ODD_DIGITS + ".-", min_size=1, max_size=22),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat().replace("+00:00", "Z")),
    st.sampled_from(
        [
            "0001-01-01T00:00:00Z",
            "0001-01-01T05:00:00Z",
            "0000-01-01T00:00:00Z",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "10000-01-01T00:00:00Z",
            "2026-03-14T03:12:44+99:99",
            "2026-02-30T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2026-03-14T03:12:44.123456789123Z",
            "２０２６-03-14T03:12:44Z",
        ]
    ),
)
_TEXT = st.text(max_size=30) | st.sampled_from(["\ud800", "x\udfffy", "ERROR ² ١٢ failed", "level=error"])
_VALUES = st.one_of(
    st.floats().map(repr), st.sampled_from(["NaN", "+Inf", "-Inf", "1e+06", " 1", "1_0", "١٢", ""]), _TEXT
)


@st.composite
def _raws(draw: st.DrawFn) -> tuple[str, Any]:
    n = draw(st.integers(min_value=1, max_value=4))
    times = [draw(_TIMES) for _ in range(n)]
    kind = draw(
        st.sampled_from(
            ["query_loki", "query_loki_logs", "query_prometheus", "query_tempo", "get_pod_events"]
        )
    )
    if kind == "query_loki":
        values = [[t, draw(_TEXT)] for t in times]
        return kind, {
            "data": {
                "resultType": "streams",
                "result": [{"stream": {"level": draw(_TEXT)}, "values": values}],
            }
        }
    if kind == "query_loki_logs":
        return kind, [{"timestamp": t, "line": draw(_TEXT), "labels": {"app": draw(_TEXT)}} for t in times]
    if kind == "query_prometheus":
        values = [[t, draw(_VALUES)] for t in times]
        return kind, {
            "data": {"resultType": "matrix", "result": [{"metric": {"pod": draw(_TEXT)}, "values": values}]}
        }
    if kind == "query_tempo":
        spans = [
            {
                "spanId": str(i),
                "parentSpanId": draw(st.sampled_from(["", "0", "9"])),
                "name": draw(_TEXT),
                "startTimeUnixNano": t,
                "endTimeUnixNano": draw(_TIMES),
                "status": {"code": draw(st.sampled_from([0, 2]))},
            }
            for i, t in enumerate(times)
        ]
        return kind, {"batches": [{"scopeSpans": [{"spans": spans}]}]}
    keys = ["firstTimestamp", "lastTimestamp", "eventTime", "deprecatedFirstTimestamp"]
    items = [{"reason": draw(_TEXT), "message": draw(_TEXT), draw(st.sampled_from(keys)): t} for t in times]
    return kind, {"kind": "EventList", "items": items}


_EMPTY_ERROR_LINE = {"data": {"result": [{"stream": {"level": "error"}, "values": [["0", ""]]}]}}


def _encode(raw: Any, how: str) -> bytes:
    if how == "ascii":  # lone surrogates travel as `\ud800` escapes, NaN as `NaN`
        return json.dumps(raw).encode()
    return json.dumps(raw, ensure_ascii=False).encode("utf-8", "surrogatepass")  # ... or as raw bytes


def _core(data: bytes, tool: str) -> None:
    try:
        out = compact_stdin(data, tool)
    except BadInput as exc:
        line = str(exc)
        assert line and "\n" not in line and len(line) <= 300
        line.encode("utf-8")  # printable on stderr: no lone surrogate
    else:
        assert set(json.loads(out)) == {"tool", "compact", "tokens"}
        assert "1-01-01T" not in out and "1969-" not in out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_raws(), st.sampled_from(["ascii", "bytes"]))
@example(("query_loki", _EMPTY_ERROR_LINE), "ascii")  # found by this test: an IndexError in loki.draft
def test_fuzz_core_formats_with_extreme_times(tool_raw: tuple[str, Any], how: str) -> None:
    tool, raw = tool_raw
    _core(_encode(raw, how), tool)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_raws(), st.sampled_from(["ascii", "bytes"]))
def test_fuzz_the_stream_decides_as_the_command_does(tool_raw: tuple[str, Any], how: str) -> None:
    """Never an exception from `process`; a dead letter exactly when the command refuses the raw."""
    tool, raw = tool_raw
    data = _encode(raw, how)
    try:
        compact_stdin(data, tool)
        refused = False
    except BadInput:
        refused = True
    result = process(
        _event_bytes(tool, data), key=None, topic="in", partition=0, offset=7, recorded=lambda _k: None
    )
    assert isinstance(result, Dead) == refused, getattr(result, "letter", None)


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=120) | st.sampled_from([b"[" * 5000, b'{"a":' * 3000, b"\xed\xa0\x80", b"NaN"]),
    st.sampled_from(["query_loki", "query_prometheus", "query_tempo", "get_pod_events", "anything"]),
)
def test_fuzz_core_raw_bytes(data: bytes, tool: str) -> None:
    _core(data, tool)
