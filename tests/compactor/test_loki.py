"""query_loki: level from the line's structure, headers that neither split nor cost, patterns before
filtering, exact counts, errors first, and a digest for every raw and every budget from the floor up."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_depth import deep  # tests/ is on sys.path (pytest's rootdir conftest)

from deploy.local.seed.generators import TEMPLATES, fill, generate_loki, loki_response, ns_at
from deploy.local.seed.shapes import noisy_errors_logs
from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compaction import loki
from services.compaction.log_anatomy import ERROR_RANK, LEVEL_RANK, learn_header, split_line
from services.compaction.log_patterns import mine
from services.compaction.model import BUDGET_FLOOR
from services.compaction.registry import RawFormatError, compact_tool_result

_COUNT = re.compile(r"^(\d+)×")
_OMITTED = re.compile(r"^(\d+) patterns, (\d+) lines")


def _lines(raw: dict) -> list[tuple[int, str]]:
    return [(int(ns), line) for s in raw["data"]["result"] for ns, line in s["values"]]


def _level(line: str, lines: list[str] | None = None) -> str | None:
    return split_line(line, learn_header(lines or [line])).level


@pytest.mark.parametrize(
    ("line", "level"),
    [
        # the header says INFO: a message word is no level
        (
            "- 1135640717 2005.12.26 R37-M1-NC-C:J02-U11 2005-12-26-23.45.17.825965 R37-M1-NC-C:J02-U11 "
            "RAS KERNEL INFO instruction cache parity error corrected",
            "info",
        ),
        (
            "03-17 16:13:47.518  1702  8671 E ActivityManager: applyOptionsLocked: Unknown animationType=0",
            "error",
        ),
        ("[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6", "error"),
        ('ts=2026-03-14T03:00:01Z level=warn msg="slow query" took=2.1s', "warn"),
        ('{"level":50,"time":1773457957233,"msg":"upstream failed"}', "error"),
        ('{"level":"fatal","ts":"2026-03-14T03:12:44Z","msg":"out of memory"}', "fatal"),
        ("E0314 03:12:44.187123       1 reflector.go:138] failed to list pods", "error"),
        ("panic: runtime error: invalid memory address", "fatal"),
        ("FATAL ERROR: JS heap out of memory", "fatal"),
        (
            "2015-10-18 18:01:47,978 WARN [main] org.apache.hadoop.ipc.Client: Address change detected.",
            "warn",
        ),
    ],
)
def test_level_from_the_line_structure(line: str, level: str) -> None:
    assert _level(line) == level


def test_a_stream_label_level_wins() -> None:
    raw = loki_response([({"app": "a", "detected_level": "error"}, [(ns_at(3, 0, 1), "something odd 42")])])
    out = compact_tool_result("query_loki", raw, {}, budget=10_000)
    assert " ERROR something odd 42" in out.compact["patterns"][0]
    assert "error 1" in out.compact["summary"]


def test_the_header_neither_splits_patterns_nor_is_repeated() -> None:
    lines = [
        f"Dec 10 0{h}:55:{s:02d} LabSZ sshd[{pid}]: Failed password for root from 1.2.3.{s} port {p} ssh2"
        for h, s, pid, p in [(6, 1, 2420, 38926), (7, 9, 2533, 4021), (8, 30, 31001, 55555)] * 4
    ]
    shape = learn_header(lines)
    messages = {split_line(line, shape).message for line in lines}
    assert all(m.startswith("Failed password for root from") for m in messages)
    assert len(mine(list(messages))) == 1
    raw = loki_response([({"app": "sshd"}, [(ns_at(3, i), line) for i, line in enumerate(lines)])])
    digest = canonical_json(compact_tool_result("query_loki", raw, {}, budget=1000).compact)
    assert "LabSZ sshd[" not in digest and "12× " in digest


def test_lines_that_differ_in_ids_and_numbers_are_one_pattern_with_ranges() -> None:
    out = compact_tool_result("query_loki", noisy_errors_logs(), {"evidence_id": "T:1:tools:0"}, budget=2000)
    errors = [p for p in out.compact["patterns"] if " ERROR " in p or "level=error" in p]
    assert len(errors) == 1 and errors[0].startswith("200× ")
    assert "request_id 200 distinct" in errors[0]  # the ranges of its variable fields
    assert canonical_json(out.compact).count("T:1:tools:0") == 1  # the evidence id, once


def test_errors_come_first_and_the_largest_patterns_are_the_story() -> None:
    raw = generate_loki(5, lines=600, patterns=8)
    out = compact_tool_result("query_loki", raw, {}, budget=300)
    shown = out.compact["patterns"]
    error_rows = [i for i, p in enumerate(shown) if any(t in p for t in (" ERROR ", " FATAL ", " CRIT "))]
    assert error_rows == list(range(len(error_rows)))  # errors before everything else


@pytest.mark.parametrize(
    "raw",
    [
        {"status": "success"},
        {"data": {"resultType": "matrix", "result": []}},
        {"data": {"resultType": "streams", "result": [{"stream": {}, "values": [["x", "line"]]}]}},
        {"data": {"resultType": "streams", "result": [{"stream": {}, "values": [["1", 5]]}]}},
        [1, 2],
    ],
)
def test_not_a_loki_response(raw: object) -> None:
    with pytest.raises(RawFormatError) as info:
        compact_tool_result("query_loki", raw, {})
    assert "\n" not in str(info.value)


def test_grafana_mcp_entry_list_is_accepted() -> None:
    entries = [
        {
            "timestamp": "1773457964187000000",
            "line": "FATAL ERROR: JS heap out of memory",
            "labels": {"app": "a"},
        },
        {"timestamp": "2026-03-14T03:12:45.5Z", "line": "FATAL ERROR: JS heap out of memory", "labels": {}},
        {"timestamp": "2026-03-14T03:00:00Z", "line": "ok 1", "labels": {"level": "info"}},
    ]
    out = compact_tool_result("query_loki_logs", entries, {}, budget=1000)
    assert out.compact["patterns"][0].startswith("2× 03:12:44–03:12:45 FATAL ERROR: JS heap out of memory")
    with pytest.raises(RawFormatError):
        compact_tool_result("query_loki_logs", [{"timestamp": "yesterday", "line": "x"}], {})


# --- invariant 7: a total function, kept + omitted = the raw's totals -----------------------------


_LEVEL_LINES = {
    "fatal": "FATAL out of memory in worker {n}",
    "error": 'level=error msg="charge failed" order={n} code=502',
    "warn": "WARN slow request {n}ms to /api/v1/cart",
    "info": "INFO served {n} items",
}
_entry = st.tuples(
    st.integers(min_value=0, max_value=899_999),  # ms offset in the window
    st.integers(min_value=0, max_value=len(TEMPLATES) + len(_LEVEL_LINES) - 1),
    st.integers(min_value=0, max_value=2**31),  # fill seed
    st.integers(min_value=0, max_value=3),  # stream
)


def _build(entries: list[tuple[int, int, int, int]]) -> dict:
    streams: list[list[tuple[int, str]]] = [[], [], [], []]
    for index, (offset, template, seed, stream) in enumerate(entries):
        rng = random.Random(seed)
        if template < len(TEMPLATES):
            line = fill(TEMPLATES[template].text, rng)
        else:
            line = list(_LEVEL_LINES.values())[template - len(TEMPLATES)].format(n=rng.randint(0, 10**6))
        streams[stream].append((ns_at(3, 0) + offset * 1_000_000 + index, line))
    return loki_response([({"app": "checkout-api", "pod": f"p{i}"}, v) for i, v in enumerate(streams) if v])


def _count(pattern: str) -> int:
    """The N of a pattern's "N×"."""
    counted = _COUNT.match(pattern)
    assert counted is not None, pattern
    return int(counted.group(1))


def _accounting(raw: dict, out_compact: dict) -> tuple[int, int]:
    shown = sum(_count(p) for p in out_compact.get("patterns", []))
    omitted = _OMITTED.match(out_compact.get("omitted", "0 patterns, 0 lines"))
    assert omitted is not None
    return shown + int(omitted.group(2)), len(_lines(raw))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entry, min_size=1, max_size=150), st.integers(min_value=BUDGET_FLOOR, max_value=1500))
def test_every_raw_fits_every_budget_from_the_floor_and_counts_what_it_leaves_out(
    entries: list[tuple[int, int, int, int]], budget: int
) -> None:
    raw = _build(entries)
    out = compact_tool_result(
        "query_loki", raw, {"evidence_id": "1773458070.000100:1:tools:0"}, budget=budget
    )
    assert out.tokens == count_value_tokens(out.compact) <= budget
    kept_plus_omitted, total = _accounting(raw, out.compact)
    assert kept_plus_omitted == total
    assert out.compact["summary"].startswith(f"{total} lines, ")
    # an error pattern is never left out while something less severe is shown
    draft = loki.draft(raw, {}, "x")
    level_of = {
        form: it.level for it in [*draft.items, *(i for v in draft.coarser for i in v)] for form in it.forms
    }
    shown = [level_of[p] for p in out.compact.get("patterns", [])]
    omitted_text = out.compact.get("omitted", "")
    if any(f"{lv} " in omitted_text.split("(")[-1] for lv in ("fatal", "critical", "error")):
        assert all(LEVEL_RANK[lv] >= ERROR_RANK for lv in shown), (shown, omitted_text)


@pytest.mark.slow
def test_the_floor_holds_for_a_worst_case_raw() -> None:
    """Thousands of distinct error patterns, long lines, many streams with long labels."""
    rng = random.Random(1)
    streams = []
    for s in range(30):
        labels = {f"label_{k}": "v" * 200 for k in range(5)} | {"pod": f"pod-{s}"}
        values = [
            (
                ns_at(3, 0) + i * 1000 + s,
                f"ERROR {' '.join(rng.choice(['alpha', 'beta', 'gamma', 'delta']) + str(i) for _ in range(40))} {'x' * 3000}",
            )
            for i in range(100)
        ]
        streams.append((labels, values))
    raw = loki_response(streams)
    # make test: the floor itself (each budget is a whole compaction of this raw); the deep run adds two
    # budgets above it, which the property above checks on every raw from the floor to 1500
    for budget in (BUDGET_FLOOR, 150, 300) if deep() else (BUDGET_FLOOR,):
        out = compact_tool_result(
            "query_loki", raw, {"evidence_id": "1773458070.000100:12:tools:3"}, budget=budget
        )
        assert out.tokens <= budget
        assert sum(_accounting(raw, out.compact)) == 2 * 3000


def test_same_raw_same_bytes_whatever_the_stream_order() -> None:
    raw = generate_loki(11, lines=400, patterns=6)
    flipped = {**raw, "data": {**raw["data"], "result": list(reversed(raw["data"]["result"]))}}
    for budget in (150, 300, 5000):
        a = compact_tool_result("query_loki", raw, {"evidence_id": "x"}, budget=budget)
        b = compact_tool_result("query_loki", flipped, {"evidence_id": "x"}, budget=budget)
        assert canonical_json(a.compact) == canonical_json(b.compact)


def test_json_lines_show_their_message_and_fields_without_time_and_level() -> None:
    line = json.dumps(
        {"level": 50, "time": 1773457957233, "pid": 1, "hostname": "h", "msg": "upstream failed", "code": 502}
    )
    anatomy = split_line(line, learn_header([line]))
    assert (anatomy.level, anatomy.message) == ("error", "upstream failed code=502")


def test_logfmt_lines_are_read_as_fields_with_the_error_kept_beside_the_message() -> None:
    """logfmt (and Go slog's text handler): time and level are header, `msg` is the message, an error
    field follows it whatever its place in the line, and prose holding `a=b` stays prose."""
    shape = learn_header([])
    line = 'time=2026-03-14T03:12:01Z level=ERROR msg="charge failed" id=3 err="dial tcp: connection refused"'
    read = split_line(line, shape)
    assert read.level == "error"
    assert read.message == 'charge failed err="dial tcp: connection refused" id=3'
    assert "time=2026-03-14T03:12:01Z" in read.header
    assert split_line("payload cache size=48211 evictions=0", shape).message.startswith("payload cache")
    assert split_line("a=1 b=2", shape).level is None  # no message nor level key: not a log record
    lines = [
        f'time=2026-03-14T03:12:{i:02d}Z level=error msg="charge failed" id={i} err="dial tcp: refused"'
        for i in range(40)
    ] + [f'time=2026-03-14T03:13:{i:02d}Z level=info msg="request done" id={i} ms={i * 7}' for i in range(60)]
    raw = loki_response([({"app": "api"}, [(ns_at(3, 12, i), line) for i, line in enumerate(lines)])])
    compact = compact_tool_result("query_loki", raw, {}, budget=300).compact
    shown = compact["patterns"]
    assert len(shown) == 2 and shown[0].startswith("40×") and shown[1].startswith("60×")
    assert 'charge failed err="dial tcp: refused"' in shown[0]


def test_an_access_log_line_is_an_error_when_the_server_failed() -> None:
    """nginx/Apache combined log: client and time are header, a 5xx is an error line; lines that
    differ only in their status digits are still read one by one (the status is the level)."""
    shape = learn_header([])
    line = '10.42.2.40 - - [14/Mar/2026:03:12:44 +0000] "POST /api/v1/checkout HTTP/1.1" 502 157 "-" "curl/8.5.0"'
    read = split_line(line, shape)
    assert read.level == "error" and read.message.startswith('"POST /api/v1/checkout HTTP/1.1" 502')
    ok = line.replace(" 502 ", " 200 ")
    lines = [ok] * 30 + [line] * 7
    raw = loki_response([({"app": "gw"}, [(ns_at(3, 12, i), text) for i, text in enumerate(lines)])])
    shown = compact_tool_result("query_loki", raw, {}, budget=300).compact["patterns"]
    assert shown[0].startswith("7×") and " 502 " in shown[0] and "ERROR" in shown[0]
    assert any(p.startswith("30×") and " 200 " in p for p in shown[1:])
