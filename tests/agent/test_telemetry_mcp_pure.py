"""Pure parts of the telemetry MCP server: time parsing, request building, response checks,
selectors, the recorded back end's window/selector/limit/step handling, and config merging."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from deploy.local.seed import SeedIncident, seed_incident
from services.boundary.timearg import BadTimeArg, parse_duration_ns, parse_time_ns, rfc3339
from services.runtime.errors import UserFacingError
from services.telemetry_mcp import config as config_mod
from services.telemetry_mcp import recorded, wire
from services.telemetry_mcp.selectors import parse_log_query, promql_selectors, series_selected

START, END = "2026-03-14T03:00:00Z", "2026-03-14T03:15:00Z"
T0_NS = 1_773_457_200 * 10**9  # 2026-03-14T03:00:00Z


@pytest.fixture(scope="module")
def seed() -> SeedIncident:
    return seed_incident()


# ---- time ------------------------------------------------------------------------------------


def test_times_in_every_accepted_form_agree() -> None:
    assert parse_time_ns("2026-03-14T03:00:00Z") == T0_NS
    assert parse_time_ns("2026-03-14T04:00:00+01:00") == T0_NS
    assert parse_time_ns("1773457200") == T0_NS
    assert parse_time_ns(str(T0_NS)) == T0_NS
    assert parse_time_ns("2026-03-14T03:00:00.187Z") == T0_NS + 187_000_000
    assert parse_time_ns("1773457200.5") == T0_NS + 500_000_000
    assert rfc3339(T0_NS + 187_000_000) == "2026-03-14T03:00:00.187Z"


@pytest.mark.parametrize(
    "bad", ["", "yesterday", "2026-03-14", "2026-03-14T03:00:00", "2026-13-14T03:00:00Z"]
)
def test_bad_times_are_refused(bad: str) -> None:
    with pytest.raises(BadTimeArg):
        parse_time_ns(bad)


def test_durations() -> None:
    assert parse_duration_ns("15s") == 15 * 10**9
    assert parse_duration_ns("1m30s") == 90 * 10**9
    assert parse_duration_ns("0.5") == 5 * 10**8
    for bad in ("0", "1x", "s", "-5s", ""):
        with pytest.raises(BadTimeArg):
            parse_duration_ns(bad)


# ---- requests --------------------------------------------------------------------------------


def test_loki_request_uses_nanoseconds_and_backward_direction() -> None:
    req = wire.loki_query_range('{app="x"}', START, END, 100)
    assert req.path == "/loki/api/v1/query_range"
    assert dict(req.params) == {
        "query": '{app="x"}',
        "start": str(T0_NS),
        "end": str(T0_NS + 900 * 10**9),
        "limit": "100",
        "direction": "backward",
    }


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("", START, END, 10), "non-empty"),
        (('{a="b"}', END, START, 10), "before start"),
        (('{a="b"}', START, END, 0), "limit"),
        (('{a="b"}', "soon", END, 10), "not a time"),
    ],
)
def test_loki_request_rejects_bad_arguments(args: tuple[Any, ...], needle: str) -> None:
    with pytest.raises(wire.ToolArgError, match=needle):
        wire.loki_query_range(*args)


def test_prometheus_request_and_point_limit() -> None:
    req = wire.prometheus_query_range("up", START, END, "1m")
    assert req.path == "/api/v1/query_range"
    assert dict(req.params) == {"query": "up", "start": "1773457200", "end": "1773458100", "step": "60"}
    with pytest.raises(wire.ToolArgError, match="11000 points"):
        wire.prometheus_query_range("up", START, "2026-03-15T03:00:00Z", "1s")


def test_tempo_and_kubernetes_requests() -> None:
    req = wire.tempo_trace_by_id("ABC123")
    assert req.path == "/api/traces/" + "0" * 26 + "abc123"
    assert req.headers["Accept"] == "application/json"
    with pytest.raises(wire.ToolArgError):
        wire.tempo_trace_by_id("not-hex")
    ev = wire.kubernetes_events("shop", "checkout-api-1")
    assert ev.path == "/api/v1/namespaces/shop/events"
    assert dict(ev.params) == {"fieldSelector": "involvedObject.kind=Pod,involvedObject.name=checkout-api-1"}
    assert wire.kubernetes_events("shop", None).params == ()
    with pytest.raises(wire.ToolArgError):
        wire.kubernetes_events("Shop/../x", None)


# ---- response checks -------------------------------------------------------------------------


def test_validators_accept_the_seed_raws_and_refuse_other_shapes(seed: SeedIncident) -> None:
    assert wire.validate_loki(seed.loki) is seed.loki
    assert wire.validate_prometheus(seed.prometheus) is seed.prometheus
    assert wire.validate_tempo(seed.tempo) is seed.tempo
    assert wire.validate_event_list(seed.pod_events) is seed.pod_events
    with pytest.raises(wire.UpstreamError, match="status='error'"):
        wire.validate_prometheus({"status": "error", "error": "bad query"})
    with pytest.raises(wire.UpstreamError, match="matrix"):
        wire.validate_prometheus({"status": "success", "data": {"resultType": "vector", "result": []}})
    with pytest.raises(wire.UpstreamError, match="EventList"):
        wire.validate_event_list({"kind": "Status", "message": "forbidden"})
    with pytest.raises(wire.UpstreamError, match="not a JSON object"):
        wire.parse_json_object("<html>", "Loki")


def test_upstream_error_message_is_one_line_with_the_reason() -> None:
    msg = wire.upstream_error_message("Prometheus", 400, '{"status":"error","error":"parse error\\nat 1"}')
    assert msg == "Prometheus answered HTTP 400: parse error at 1"
    assert "no such trace" in wire.upstream_error_message("Tempo", 404, "trace not found")


# ---- selectors -------------------------------------------------------------------------------


def test_log_query_selector_and_line_filters() -> None:
    q = parse_log_query(
        '{namespace="shop", app=~"checkout.*", stream!="stdout"} |= "FATAL" != "debug" | json'
    )
    assert q.selects({"namespace": "shop", "app": "checkout-api", "stream": "stderr"})
    assert not q.selects({"namespace": "shop", "app": "checkout-api", "stream": "stdout"})
    assert not q.selects({"namespace": "shop", "app": "xcheckout"})  # regexes are anchored
    assert q.keeps("FATAL ERROR: JS heap out of memory")
    assert not q.keeps("FATAL debug")
    assert not q.keeps("all fine")
    with pytest.raises(wire.ToolArgError, match="metric queries"):
        parse_log_query('count_over_time({app="x"}[5m])')
    with pytest.raises(wire.ToolArgError, match="empty value"):
        parse_log_query('{app=~".*"}')
    with pytest.raises(wire.ToolArgError):
        parse_log_query('{app="x" |= "y"')


def test_promql_selectors() -> None:
    sels = promql_selectors('max by (pod) (rate(container_memory_working_set_bytes{namespace="shop"}[5m]))')
    assert series_selected({"__name__": "container_memory_working_set_bytes", "namespace": "shop"}, sels)
    assert not series_selected({"__name__": "container_memory_working_set_bytes", "namespace": "edge"}, sels)
    assert not series_selected({"__name__": "pod", "namespace": "shop"}, sels)  # `by (pod)` is no selector
    assert series_selected({"__name__": "up"}, promql_selectors("up == 0"))
    assert not series_selected({"__name__": "down"}, promql_selectors("up == 0"))


# ---- recorded back end -----------------------------------------------------------------------


def _lines(resp: dict[str, Any]) -> list[tuple[int, str]]:
    return [(int(ns), line) for s in resp["data"]["result"] for ns, line in s["values"]]


def test_recorded_loki_full_window_is_the_seed_raw_verbatim(seed: SeedIncident) -> None:
    assert recorded.serve_loki(seed.loki, '{namespace="shop"}', START, END, 5000) == seed.loki
    assert len(_lines(seed.loki)) == 412


def test_recorded_loki_honours_window_filters_and_limit(seed: SeedIncident) -> None:
    before = copy.deepcopy(seed.loki)
    lo, hi = "2026-03-14T03:12:00Z", "2026-03-14T03:13:00Z"
    out = recorded.serve_loki(seed.loki, '{namespace="shop"}', lo, hi, 5000)
    kept = _lines(out)
    assert kept and len(kept) < 412
    assert all(parse_time_ns(lo) <= ns <= parse_time_ns(hi) for ns, _ in kept)
    expected = [x for x in _lines(seed.loki) if parse_time_ns(lo) <= x[0] <= parse_time_ns(hi)]
    assert sorted(kept) == sorted(expected)
    assert out["data"]["stats"]["summary"]["totalEntriesReturned"] == len(kept)

    fatal = _lines(recorded.serve_loki(seed.loki, '{namespace="shop"} |= "FATAL ERROR"', START, END, 5000))
    assert len(fatal) == 198
    oom = recorded.serve_loki(seed.loki, '{app="kube-event-exporter"}', START, END, 5000)
    assert len(_lines(oom)) == 3 and all("OOMKilled" in line for _, line in _lines(oom))
    assert _lines(recorded.serve_loki(seed.loki, '{namespace="other"}', START, END, 5000)) == []

    newest = _lines(recorded.serve_loki(seed.loki, '{namespace="shop"}', START, END, 10))
    assert sorted(newest, reverse=True) == sorted(_lines(seed.loki), reverse=True)[:10]
    assert seed.loki == before  # the recording itself is never modified


def test_recorded_prometheus_window_and_step(seed: SeedIncident) -> None:
    q = 'container_memory_working_set_bytes{namespace="shop"}'
    assert recorded.serve_prometheus(seed.prometheus, q, START, END, "15s") == seed.prometheus
    lo = "2026-03-14T03:10:00Z"
    part = recorded.serve_prometheus(seed.prometheus, q, lo, END, "15s")
    for series in part["data"]["result"]:
        assert [t for t, _ in series["values"]] == [1_773_457_800 + 15 * i for i in range(20)]
    coarse = recorded.serve_prometheus(seed.prometheus, q, START, END, "1m")
    original = {
        s["metric"]["pod"]: dict((t, v) for t, v in s["values"]) for s in seed.prometheus["data"]["result"]
    }
    for series in coarse["data"]["result"]:
        times = [t for t, _ in series["values"]]
        assert times == [1_773_457_200 + 60 * i for i in range(16)]
        # each point is the latest recorded sample at or before its evaluation time
        for t, v in series["values"]:
            latest = max(x for x in original[series["metric"]["pod"]] if x <= t)
            assert v == original[series["metric"]["pod"]][latest]
    one = recorded.serve_prometheus(
        seed.prometheus, q.replace("}", ',pod="checkout-api-7d9f8b6c5-x2k4q"}'), START, END, "15s"
    )
    assert [s["metric"]["pod"] for s in one["data"]["result"]] == ["checkout-api-7d9f8b6c5-x2k4q"]
    assert recorded.serve_prometheus(seed.prometheus, "node_load1", START, END, "15s")["data"]["result"] == []


def test_recorded_events_and_traces(seed: SeedIncident) -> None:
    assert recorded.serve_events(seed.pod_events, "shop", None) == seed.pod_events
    pod = "checkout-api-7d9f8b6c5-x2k4q"
    mine = recorded.serve_events(seed.pod_events, "shop", pod)
    assert 0 < len(mine["items"]) < 30 and all(i["involvedObject"]["name"] == pod for i in mine["items"])
    assert recorded.serve_events(seed.pod_events, "edge", None)["items"] == []
    (tid,) = recorded.trace_ids(seed.tempo)
    assert recorded.serve_tempo((seed.tempo,), tid.upper()) is seed.tempo
    with pytest.raises(recorded.TraceNotFound):
        recorded.serve_tempo((seed.tempo,), "0" * 31 + "1")


# ---- config ----------------------------------------------------------------------------------


def test_config_precedence_and_in_cluster_defaults() -> None:
    env = {
        "LOKI_URL": "http://env:3100",
        "TELEMETRY_MCP_BACKEND": "http",
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
    }
    cfg = config_mod.from_sources(env, {"loki_url": "http://file:3100", "timeout_s": 5}, {"timeout_s": 2.5})
    assert (cfg.backend, cfg.loki_url, cfg.timeout_s) == ("http", "http://file:3100", 2.5)
    assert cfg.kubernetes_url == "https://10.0.0.1:443"
    assert cfg.kubernetes_ca_file and cfg.kubernetes_ca_file.endswith("ca.crt")
    with pytest.raises(UserFacingError, match="unknown backend"):
        config_mod.from_sources({"TELEMETRY_MCP_BACKEND": "grafana"}, {}, {})
    with pytest.raises(UserFacingError, match="unknown config keys"):
        config_mod.from_sources({}, {"lokiurl": "x"}, {})


def test_the_recorded_back_end_has_no_default_recording_in_production() -> None:
    from services.telemetry_mcp.backends import load_recording

    with pytest.raises(wire.UpstreamError, match="needs a recording: --recording FILE"):
        load_recording(None)
    assert load_recording("deploy.local.seed:seed_recording").loki  # what the dev tools name


def test_the_back_end_requests_read_a_time_as_the_scope_check_does() -> None:
    # One parser (services/boundary/timearg.py): Unix milliseconds were once read here as seconds,
    # thousands of years ahead, while the scope check refused them.
    with pytest.raises(wire.ToolArgError, match="not a time"):
        wire.loki_query_range('{app="x"}', "1773457200000", END, 100)
