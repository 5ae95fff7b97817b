"""query_loki on answers of many streams: every pattern says which app and which pods it came from,
labels common to the answer are said once, and Loki >= 3 line metadata (`detected_level`) is read."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import bench_loki_streams
from schemas.tokens import count_value_tokens
from services.compaction import loki
from services.compaction.log_anatomy import learn_header, split_line
from services.compaction.log_streams import StreamSet
from services.compaction.registry import RawFormatError, compact_tool_result

T0 = 1773457957000000000
_COUNT = re.compile(r"^(\d+)×")


def _stream(labels: dict[str, str], lines: list[str], start: int = 0) -> dict:
    return {
        "stream": labels,
        "values": [[str(T0 + (start + i) * 10**9), line] for i, line in enumerate(lines)],
    }


def _incident() -> dict:
    """Three Kafka brokers (one with a full disk), two API pods (one refusing far more), JSON lines."""
    result = []
    for pod in ("kafka-0", "kafka-1", "kafka-2"):
        lines = [
            f"[2026-03-14 03:12:{i % 60:02d},123] INFO [ReplicaFetcher replicaId={i % 3}] Fetching from broker {i % 3}"
            " (kafka.server.ReplicaFetcherThread)"
            for i in range(30)
        ]
        if pod == "kafka-1":
            lines += [
                f"[2026-03-14 03:13:{i % 60:02d},456] ERROR [Log partition=orders-{i % 6}] Disk full writing segment {i}"
                " (kafka.log.LocalLog)"
                for i in range(40)
            ]
        result.append(_stream({"namespace": "prod", "app": "kafka", "pod": pod}, lines))
    for pod, failures in (("checkout-api-7f9c-x2", 25), ("checkout-api-7f9c-k8", 5)):
        lines = [
            json.dumps(
                {
                    "level": "error",
                    "msg": "charge failed",
                    "error": "dial tcp 10.0.0.7:5432: connection refused",
                    "order": i,
                }
            )
            for i in range(failures)
        ]
        lines += [json.dumps({"level": "info", "msg": "served", "ms": i}) for i in range(20)]
        result.append(_stream({"namespace": "prod", "app": "checkout-api", "pod": pod}, lines))
    return {"status": "success", "data": {"resultType": "streams", "result": result}}


def _pattern(patterns: list[str], words: str) -> str:
    found = [p for p in patterns if words in p]
    assert len(found) == 1, (words, patterns)
    return found[0]


@pytest.mark.parametrize("budget", [2000, 300, 150])
def test_every_pattern_names_its_app_and_the_pods_when_fewer_than_all(budget: int) -> None:
    out = compact_tool_result("query_loki", _incident(), {"evidence_id": "x"}, budget=budget)
    assert out.tokens == count_value_tokens(out.compact) <= budget
    patterns = out.compact["patterns"]
    disk = _pattern(patterns, "Disk full")
    assert disk.startswith("40×") and "[pod kafka-1 only]" in disk  # the pod's name says the app
    charge = _pattern(patterns, "charge failed")
    assert charge.startswith("30×") and "[app=checkout-api]" in charge  # all of its pods: no pods named
    assert "error=dial" in charge  # the error field stays with its pattern, right after the message
    fetch = _pattern(patterns, "Fetching from broker")
    assert fetch.startswith("90×")
    if budget >= 300:  # below error level, where it came from goes before the pattern's times
        assert "[app=kafka]" in fetch


def test_labels_every_stream_shares_are_said_once() -> None:
    out = compact_tool_result("query_loki", _incident(), {"evidence_id": "x"}, budget=2000)
    assert out.compact["streams"] == "5 streams {namespace=prod; app: 2 values, pod: 5 values}"
    assert not any("namespace" in p for p in out.compact["patterns"])


def test_one_stream_says_nothing_about_streams() -> None:
    raw = {"data": {"result": [_stream({"app": "a", "pod": "p"}, ["ERROR boom 1", "ERROR boom 2"])]}}
    out = compact_tool_result("query_loki", raw, {"evidence_id": "x"}, budget=500)
    assert "streams" not in out.compact
    assert all("[" not in p.split(" boom")[0] for p in out.compact["patterns"])


def test_attribution_names_few_sources_and_counts_many() -> None:
    streams = [{"app": "api", "pod": f"api-{i}"} for i in range(5)] + [{"app": "db", "pod": "db-0"}]
    sources = StreamSet(streams, range(6))
    assert sources.attribution({0, 1}) == "2 of 5 pods: api-{0,1}"  # the names say the app
    assert sources.attribution({0, 1, 2}) == "app=api; 3 of 5 pods"
    assert sources.attribution({0, 1, 2, 3, 4}) == "app=api"  # all of the app's pods
    assert sources.attribution({5}) == "app=db"  # the app's only pod
    assert sources.attribution({0, 5}) == "2 of 6 pods: api-0, db-0"
    assert sources.attribution(range(6)) == ""
    assert StreamSet([{"pod": "a"}], [0]).attribution({0}) == ""  # one stream: the selector's own


def test_structured_metadata_levels_lines_and_never_reads_as_a_source() -> None:
    """Loki >= 3: a values entry's third element, flat or categorized; `detected_level` levels the
    line (the line's words say nothing of it), and a trace id is not a source."""
    values = [
        [str(T0 + i), f"payment {i} declined by issuer", {"detected_level": "error", "trace_id": f"t{i}"}]
        for i in range(6)
    ] + [
        [
            str(T0 + 10 + i),
            f"payment {i} accepted",
            {"structuredMetadata": {"detected_level": "info", "trace_id": f"u{i}"}, "parsed": {}},
        ]
        for i in range(4)
    ]
    raw = {"data": {"result": [{"stream": {"app": "pay", "pod": "pay-0"}, "values": values}]}}
    out = compact_tool_result("query_loki", raw, {"evidence_id": "x"}, budget=500)
    declined = _pattern(out.compact["patterns"], "declined")
    assert declined.startswith("6×") and " ERROR " in declined
    assert "trace_id" not in json.dumps(out.compact)
    counts = [_COUNT.match(p) for p in out.compact["patterns"]]
    assert sum(int(m.group(1)) for m in counts if m is not None) == 10 and None not in counts


def test_metadata_that_is_not_an_object_is_a_format_error() -> None:
    raw = {"data": {"result": [{"stream": {}, "values": [[str(T0), "x", "not an object"]]}]}}
    with pytest.raises(RawFormatError, match="metadata is not an object"):
        loki.parse(raw)


def test_a_json_lines_error_field_comes_right_after_its_message() -> None:
    """So a clipped exemplar still says what failed (the fields are otherwise in the line's order)."""
    line = json.dumps(
        {"msg": "charge failed", "order": 7, "user": "u1", "http": {"code": 502}, "error": "EOF"}
    )
    anatomy = split_line(line, learn_header([line]))
    assert anatomy.message == "charge failed error=EOF order=7 user=u1 http.code=502"


def test_one_apps_pods_read_one_layout_so_a_template_is_one_pattern_across_them() -> None:
    """A pod that writes only errors must not learn another header than its siblings: the header is
    learnt per family of streams (the labels but the pod), never per stream."""

    def pg(n: int, tag: str, text: str) -> str:
        return f"2026-03-14 03:12:{n % 60:02d}.123 UTC [{1000 + n}] {tag}:  {text}"

    busy = [pg(n, "LOG", f"checkpoint complete {n}") for n in range(30)]
    busy += [pg(n, "ERROR", "could not serialize access: concurrent update") for n in range(5)]
    failing = [pg(n, "ERROR", "could not serialize access: concurrent update") for n in range(20)]
    raw = {
        "data": {
            "result": [
                _stream({"app": "postgres", "pod": "postgres-0"}, busy),
                _stream({"app": "postgres", "pod": "postgres-1"}, failing, start=100),
            ]
        }
    }
    grouped = loki.line_patterns(raw)
    serialize = {p for line, p in grouped if "serialize" in line}
    assert len(serialize) == 1
    out = compact_tool_result("query_loki", raw, {"evidence_id": "x"}, budget=500)
    assert _pattern(out.compact["patterns"], "serialize").startswith("25×")


@pytest.mark.parametrize("budget", [300, 150])
def test_every_kept_pattern_of_a_many_stream_answer_shows_a_line_not_a_skeleton(budget: int) -> None:
    """Issue 36: a kept pattern shows its line (cut at `…` if it must be); an error's line is never
    traded for a skeleton of constant words, a lesser pattern is left out to pay for it."""
    kept = 0
    for seed in range(12):
        raw, facts = bench_loki_streams.answer(seed)
        patterns = compact_tool_result("query_loki", raw, {}, budget=budget).compact["patterns"]
        kept += len(patterns)
        assert bench_loki_streams.skeletons(patterns) == [], (seed, patterns)
        for fact in facts if budget >= 300 else ():  # and the facts still stand (bench_loki_streams' budgets)
            assert all(bench_loki_streams.kept(patterns, fact).values()), (seed, fact, patterns)
    assert kept >= 60
