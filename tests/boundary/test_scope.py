"""The pure tool-call checks: offered tools, the pinned window, the incident's scope, sane limits."""

from __future__ import annotations

import pytest

from services.boundary.scope import Limits, check_call, derive_scope
from services.boundary.selectors import OutOfScope, check_logql, check_promql, literal_alternatives

OFFERED = frozenset({"query_loki", "query_prometheus", "get_pod_events", "query_tempo"})
WINDOW = ("2026-03-14T09:00:00+00:00", "2026-03-14T10:00:00+00:00")
SCOPE = derive_scope("C1-1.0", WINDOW, {"namespace": "payments", "alertname": "X"}, None, None)
NS = {"namespace": frozenset({"payments"})}


def loki(query: str = '{namespace="payments"}', **kw: object) -> dict[str, object]:
    return {"query": query, "start": WINDOW[0], "end": WINDOW[1], **kw}


def test_a_tool_not_offered_is_refused_with_its_name() -> None:
    for name in ("get_evidence", "delete_everything"):
        checked = check_call(name, {"id": "x"}, OFFERED, SCOPE)
        assert checked.refusal is not None and name in checked.refusal


def test_a_ten_year_window_is_clamped_and_the_clamp_is_said() -> None:
    checked = check_call(
        "query_loki", loki(start="2020-01-01T00:00:00Z", end="2030-01-01T00:00:00Z"), OFFERED, SCOPE
    )
    assert checked.refusal is None
    assert (checked.args["start"], checked.args["end"]) == ("2026-03-14T09:00:00Z", "2026-03-14T10:00:00Z")
    assert "clamped" in checked.note_text()


def test_a_range_entirely_outside_the_window_is_refused() -> None:
    checked = check_call("query_loki", loki(start="2020-01-01T00:00:00Z", end="1577923200"), OFFERED, SCOPE)
    assert checked.refusal is not None and "outside" in checked.refusal


def test_an_unreadable_time_is_refused_not_guessed() -> None:
    assert check_call("query_loki", loki(start="yesterday"), OFFERED, SCOPE).refusal is not None


def test_limit_and_step_are_clamped_to_sane_maxima() -> None:
    checked = check_call("query_loki", loki(limit=50_000), OFFERED, SCOPE)
    assert checked.args["limit"] == Limits().loki_limit and "limit clamped" in checked.note_text()
    prom = {"query": 'up{namespace="payments"}', "start": WINDOW[0], "end": WINDOW[1], "step": "1s"}
    checked = check_call("query_prometheus", prom, OFFERED, SCOPE)
    assert checked.args["step"] == "4s"  # 3600 s / 1100 points, rounded up
    assert "step raised" in checked.note_text()


def test_another_namespace_is_refused_in_logql_and_promql() -> None:
    hostile = check_call("query_loki", loki('{namespace="kube-system"} |= "password"'), OFFERED, SCOPE)
    assert hostile.refusal is not None and "namespace" in hostile.refusal
    prom = {"query": 'rate(x{namespace="payments"}[5m]) / rate(y[5m])', "start": WINDOW[0], "end": WINDOW[1]}
    assert "selector 2" in str(check_call("query_prometheus", prom, OFFERED, SCOPE).refusal)
    pods = check_call("get_pod_events", {"namespace": "kube-system"}, OFFERED, SCOPE)
    assert pods.refusal is not None
    assert check_call("get_pod_events", {"namespace": "payments"}, OFFERED, SCOPE).refusal is None


@pytest.mark.parametrize(
    "query",
    [
        '{namespace=~"pay.*"}',
        '{namespace=~"payments|kube-system"}',
        '{namespace!="payments"}',
        '{app="x"}',
        '{namespace="payments"} or {namespace="kube-system"}',
        'sum(count_over_time({namespace="kube-system"}[5m]))',
        "not logql at all",
        '{namespace="payments"',
    ],
)
def test_logql_selectors_that_could_leave_the_scope_are_refused(query: str) -> None:
    with pytest.raises(OutOfScope):
        check_logql(query, NS)


@pytest.mark.parametrize(
    "query",
    [
        '{namespace="payments"}',
        '{namespace=~"payments", app="a"} |= "x{y}" | json',
        '{app="a",namespace="payments",} != `[a]`',
    ],
)
def test_logql_selectors_pinned_to_the_scope_pass(query: str) -> None:
    check_logql(query, NS)


@pytest.mark.parametrize(
    "query",
    [
        'x{namespace="payments"} offset 1d',
        'x{namespace="payments"} @ 100',
        'x{namespace="payments"}[30d]',
        'x{namespace="payments"} + on() group_left y',
        'x{namespace="payments" or namespace="kube-system"}',
        'sum(rate(x{namespace="payments"}[5m])) / sum(rate({__name__="y"}[5m]))',
        "x{",
    ],
)
def test_promql_every_vector_selector_must_be_in_scope(query: str) -> None:
    with pytest.raises(OutOfScope):
        check_promql(query, NS, 3600)


def test_promql_in_scope_passes() -> None:
    check_promql('sum by (pod) (rate({__name__=~".+_total",namespace="payments"}[5m]))', NS, 3600)
    check_promql('a{namespace="payments"} / ignoring(x) b{namespace=~"payments"}', NS, 3600)


def test_regex_alternation_of_literals_only() -> None:
    assert literal_alternatives(r"a|b\.c") == ["a", "b.c"]
    assert literal_alternatives("a.*") is None and literal_alternatives("(a|b)") is None


def test_a_mention_thread_gets_a_default_window_ending_at_the_mention() -> None:
    scope = derive_scope("C1-1.0", None, None, "1773478800.000100", {"namespace": ["payments"]})
    assert scope.window is not None and scope.window[1] - scope.window[0] == 3600 * 10**9
    checked = check_call(
        "query_loki", loki(start="2026-03-14T08:30:00Z", end="2026-03-14T10:00:00Z"), OFFERED, scope
    )
    assert checked.args["end"] == "2026-03-14T09:00:00.0001Z" and checked.refusal is None


def test_no_scope_known_refuses_scoped_queries() -> None:
    scope = derive_scope("C1-1.0", None, None, "1773478800", None)
    assert "unknown" in str(check_call("query_loki", loki(), OFFERED, scope).refusal)


def test_the_callers_thread_argument_is_never_forwarded_as_given() -> None:
    checked = check_call("query_loki", loki(thread="C9-other"), OFFERED, SCOPE)
    assert "thread" not in checked.args
