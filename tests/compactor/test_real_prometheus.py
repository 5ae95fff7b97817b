"""query_prometheus on answers of a real Prometheus (v0.316.0), recorded byte for byte.

The fixtures (`fixtures/real/prometheus-v0.316.0/`, see its README) were recorded by
`benchmarks/record_prometheus.py`; nothing here builds or runs Prometheus. What a faithful digest
must do is judged from the raw by this file's own measure, not the compactor's: a series is
*active* when its finite values span at least a tenth of the widest span among the series of its
metric name, and *flat* when they span nothing.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from schemas.tokens import count_value_tokens
from services.compaction import prometheus
from services.compaction.registry import CompactOutcome, budget_for, compact_tool_result
from services.compaction.timefmt import iso_from_unix
from services.compactor.cli import compact_stdin

from .test_prometheus_digest import _assert_copied, _assert_counts

TOOL = "query_prometheus"
RECORDED = Path(__file__).parent / "fixtures" / "real" / "prometheus-v0.316.0"
# `make test-integration` points this at answers it has just recorded from a live Prometheus
HERE = Path(os.environ.get("REAL_PROMETHEUS_ANSWERS") or RECORDED)
RECORDING = json.loads((HERE / "recording.json").read_text())
NAMES = sorted(p.stem for p in HERE.glob("*.json") if p.stem != "recording")
ACTIVE_SHARE = 0.1
HEAD = re.compile(r"^(?:(\d+) series )?([^{]*)\{(.*?)\}: ")


def _raw(name: str) -> dict[str, Any]:
    return json.loads((HERE / f"{name}.json").read_bytes())


def _series(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return list(raw["data"]["result"])


def _span(series: dict[str, Any]) -> float:
    values = [float(v) for _, v in series["values"]]
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) - min(finite) if finite else 0.0


def _activity(raw: dict[str, Any]) -> tuple[set[int], set[int]]:
    """(active, flat) series indexes, by this test's measure (peers: the same metric name)."""
    result = _series(raw)
    spans = [_span(s) for s in result]
    widest: dict[str, float] = {}
    for s, span in zip(result, spans, strict=True):
        name = s["metric"].get("__name__", "")
        widest[name] = max(widest.get(name, 0.0), span)
    active = {
        i
        for i, (s, span) in enumerate(zip(result, spans, strict=True))
        if span > 0 and span >= ACTIVE_SHARE * widest[s["metric"].get("__name__", "")]
    }
    return active, {i for i, span in enumerate(spans) if span == 0}


def _matches(pattern: str, value: str | None) -> bool:
    """A label as a line shows it: `v`, `prefix*` (a group's or twins' common prefix), `a|b|c` (every
    twin's value), or clipped at 40 characters (`...…`)."""
    if value is None:
        return False
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    if "|" in pattern and value in pattern.split("|"):
        return True
    if pattern.endswith("…"):
        return value.startswith(pattern[:-1])
    return value == pattern


def _covers(raw: dict[str, Any], line: str) -> tuple[int, list[int]]:
    """(how many series the line says it stands for, the series of the raw its labels name)."""
    head = HEAD.match(line)
    assert head is not None, line
    count = int(head[1]) if head[1] else 1
    pairs = [p.split("=", 1) for p in head[3].split(", ") if "=" in p]
    named = []
    for i, s in enumerate(_series(raw)):
        labels = s["metric"]
        if head[2] and not _matches(head[2], labels.get("__name__")):
            continue
        if all(_matches(v, labels.get(k)) for k, v in pairs):
            named.append(i)
    return count, named


def _lines(raw: dict[str, Any], out: CompactOutcome) -> list[tuple[str, int, list[int]]]:
    """Each shown line, how many series it stands for and which ones its labels name: exactly its own
    for a line of one series; for a group (`N series {pod=x-*}`) every series its labels allow, which
    may be more than its N members."""
    shown = []
    for line in out.compact.get("series", []):
        count, named = _covers(raw, line)
        if count == 1:
            assert len(named) == 1, (line, named)  # a line of its own names exactly its series
        else:
            assert len(named) >= count, (line, named)
        shown.append((line, count, named))
    return shown


def _digest(name: str) -> tuple[dict[str, Any], CompactOutcome]:
    raw = _raw(name)
    out = compact_tool_result(TOOL, raw, {})
    assert out.budget == budget_for(TOOL)
    assert out.tokens <= out.budget and count_value_tokens(out.compact) == out.tokens
    return raw, out


def test_the_fixtures_say_which_prometheus_answered() -> None:
    assert RECORDING["binary"].startswith("mod github.com/prometheus/prometheus v0.316.0 ")
    assert set(NAMES) == {n for n, q in RECORDING["queries"].items() if "error" not in q}
    readme = (RECORDED / "README.md").read_text()
    assert "v0.316.0" in readme and "benchmarks/record_prometheus.py" in readme


@pytest.mark.parametrize("name", NAMES)
def test_every_real_answer_fits_its_budget_with_exact_counts(name: str) -> None:
    raw, out = _digest(name)
    _assert_counts(raw, out)
    _assert_copied(raw, out)
    text = compact_stdin((HERE / f"{name}.json").read_bytes(), TOOL)  # the CLI on the exact bytes
    assert json.loads(text)["compact"] == out.compact


@pytest.mark.parametrize("name", NAMES)
def test_no_flat_line_while_an_active_series_is_left_out(name: str) -> None:
    """The order is the point of the digest: while an active series is neither on a line of its own
    nor in a shown group, no line is spent on series that do not move at all."""
    raw, out = _digest(name)
    active, flat = _activity(raw)
    shown = _lines(raw, out)
    covered = {i for line, _, named in shown if not _says_flat(line) for i in named}
    if active - covered:
        for line, count, named in shown:
            assert not _says_flat(line), (line, sorted(active - covered))
            assert count > 1 or named[0] not in flat, (line, sorted(active - covered))


def _says_flat(line: str) -> bool:
    """A line that says its series do not move: `{...}: flat at 0`, `N series {...}: flat 0..1`."""
    return line.split("}: ", 1)[1].startswith("flat ")


@pytest.mark.parametrize("name", NAMES)
def test_the_most_active_series_has_a_line_of_its_own(name: str) -> None:
    """The series that moves the most is shown by itself, or with its twins (the same samples), not
    only inside a group's range. Spans of different metrics (bytes, seconds, descriptors) are not
    compared: in an answer of several metrics, the first line shows an active series."""
    raw, out = _digest(name)
    result = _series(raw)
    active, _ = _activity(raw)
    if not active:
        return
    shown = _lines(raw, out)
    own = [
        (named[0], named[:count])
        for _, count, named in shown
        if all(result[i]["values"] == result[named[0]]["values"] for i in named[:count])
    ]
    if len({s["metric"].get("__name__", "") for s in result}) > 1:
        assert own and own[0][0] in active and shown[0][2][0] == own[0][0], out.compact
        return
    top = max(active, key=lambda i: _span(result[i]))
    assert any(top in twins for _, twins in own), (result[top]["metric"], out.compact)


@pytest.mark.parametrize("name", NAMES)
def test_a_series_called_flat_moves_less_than_its_level(name: str) -> None:
    """`flat ~0.95` said of a handler whose rate went from 0 to 4.08 is a lie. A line whose whole
    trend is `flat ~V` shows a series whose finite values span at most |V| (V has two significant
    digits: 10% slack), unless the line says what stands out (`spike`, `dip`)."""
    raw, out = _digest(name)
    result = _series(raw)
    for line, count, named in _lines(raw, out):
        if count != 1 or "spike" in line or "dip" in line:
            continue
        for part in line.split("}: ", 1)[1].split("; "):
            flat = re.fullmatch(r"flat ~([0-9.e+-]+)([KMGTP]i?|k)?", part)
            if flat and not flat[2]:
                assert _span(result[named[0]]) <= 1.1 * abs(float(flat[1])), line


@pytest.mark.parametrize("name", ["rate_http_requests", "rate_http_requests_1m"])
def test_a_rate_of_dozens_of_handlers_keeps_the_busy_ones_and_counts_the_idle(name: str) -> None:
    """The issue-18 probe's shape: `rate(prometheus_http_requests_total[...])`, 64 handlers of which a
    few carry traffic. Every active series gets a line of its own; the flat ones none: they are
    counted (a group, or the omitted count), never listed one by one."""
    raw, out = _digest(name)
    active, flat = _activity(raw)
    assert 3 <= len(active) <= 6 and len(flat) >= 50  # what the recording holds (see README)
    shown = _lines(raw, out)
    alone = {named[0] for _, count, named in shown if count == 1}
    assert active <= alone, sorted(active - alone)
    assert not alone & flat
    groups = [(line, count) for line, count, _ in shown if count > 1]
    for line, _ in groups:
        assert _says_flat(line), line
    in_groups = sum(count for _, count in groups)
    omitted = re.match(r"(\d+) series", out.compact.get("omitted", "0 series"))
    assert omitted is not None
    assert len(alone) + in_groups + int(omitted[1]) == len(_series(raw))


def _nonfinite(raw: dict[str, Any]) -> Counter[str]:
    return Counter(v for s in _series(raw) for _, v in s["values"] if not math.isfinite(float(v)))


def test_nan_and_inf_of_a_real_ratio_are_counted_never_read_as_numbers() -> None:
    """0/0 of idle handlers is "NaN" (and a counter reset gave "+Inf"): the summary counts them
    exactly, and no min/max/range shows one as a value."""
    raw, out = _digest("mean_latency")
    bad = _nonfinite(raw)
    assert bad["NaN"] > 0
    said = ", ".join(f"{n} {v}" for v, n in sorted(bad.items()))
    assert out.compact["summary"].endswith(f"samples ({said})")
    for line in out.compact["series"]:
        body = line.split("}: ", 1)[1]
        assert not re.search(r"\b(min|max|max=last|min=last|flat at) [+-]?(NaN|Inf)", body), line
        assert not re.search(r"(NaN|Inf)\.\.|\.\.[+-]?(NaN|Inf)", body), line


def _gaps(series: dict[str, Any], step: float) -> list[tuple[float, float]]:
    ts = [float(t) for t, _ in series["values"]]
    return [(a, b) for a, b in itertools.pairwise(ts) if b - a > 1.5 * step]


def test_a_target_that_went_away_is_said_to_have_a_gap() -> None:
    """The peer Prometheus was stopped and started again: Prometheus leaves out of the range query
    the steps after its stale markers. The digest says how many samples it has, where it starts
    when that is after the window's first sample, and where they stop and start again, and does not
    mark the complete series."""
    raw, out = _digest("goroutines")
    step = float(RECORDING["queries"]["goroutines"]["params"]["step"])
    result = _series(raw)
    gapped = [s for s in result if _gaps(s, step)]
    assert len(gapped) == 1 and len(result) == 2
    ((a, b),) = _gaps(gapped[0], step)
    gap = f"gap {iso_from_unix(a)[11:19]}-{iso_from_unix(b)[11:19]}"
    forms = {form: item.forms for item in prometheus.draft(raw, {}, "e").items for form in item.forms}
    # a peer first scraped after the window's first sample says where it starts, before its gap
    first = float(gapped[0]["values"][0][0])
    late = first > min(float(s["values"][0][0]) for s in result)
    start = f"from {iso_from_unix(first)[11:19]}, " if late else ""
    for line in out.compact["series"]:
        _, named = _covers(raw, line)
        if result[named[0]] is gapped[0]:
            assert gap in line or line == forms[line][-1], (gap, line)  # all but the tersest form
            assert f"({len(gapped[0]['values'])} pts, {start}{gap})" in line or "pts" not in line, line
        else:
            assert " pts" not in line and "gap" not in line, line


def test_the_stale_target_reads_the_same_through_the_cli() -> None:
    data = (HERE / "up.json").read_bytes()
    out = json.loads(compact_stdin(data, TOOL))
    peer = [line for line in out["compact"]["series"] if "job=peer" in line]
    assert len(peer) == 1 and "drop to 0 at " in peer[0] and "jump to 1 at " in peer[0]


LIVE = Path(__file__).parent / "fixtures" / "real" / "live-issue18"


@pytest.mark.parametrize(
    "path",
    [
        RECORDED / "rate_ingest_requests.json",
        LIVE / "query_prometheus_ingest.json",
        LIVE / "query_prometheus_ingest_2.json",
    ],
    ids=["recorded", "live", "live-2"],
)
def test_a_line_keeps_every_label_that_varies_and_a_rising_series_its_start(path: Path) -> None:
    """Found live (issue 18): `status` alone told the ingest's series apart, so the 250-token digest
    dropped `endpoint=alertmanager`/`endpoint=healthz` (which endpoint refused?), and a series that
    rose (`rising ~0.053/min`) lost the value it rose from. The fixtures are real Prometheus answers
    about the ingest (the committed recording, and two of the live scenario's own answers)."""
    raw = json.loads(path.read_bytes())
    result = _series(raw)
    varying = {k for s in result for k in s["metric"] if len({r["metric"].get(k) for r in result}) > 1}
    assert varying == {"endpoint", "status"}
    out = compact_tool_result(TOOL, raw, {"evidence_id": "1796304420.628023:1:tools:1"})
    assert out.tokens <= budget_for(TOOL)
    rose = 0
    top = max(range(len(result)), key=lambda i: _span(result[i]))
    for line, count, named in _lines(raw, out):
        assert count == 1
        head = HEAD.match(line)
        assert head is not None, line
        pairs = {k: v for k, v in (p.split("=", 1) for p in head[3].split(", "))}
        assert set(pairs) == varying, line  # every label that varies, not only the fewest that tell apart
        values = result[named[0]]["values"]
        finite = [(float(v), i, v) for i, (_, v) in enumerate(values) if math.isfinite(float(v))]
        lo, hi = min(finite), max(finite, key=lambda f: (f[0], -f[1]))
        if lo[1] < hi[1] and "rising" in line:  # it rose: its start is on the line, copied from the raw
            rose += 1
            assert f"min {lo[2]} " in line or f"min {lo[2]};" in line or f"min {lo[2]}," in line, line
        if named[0] == top:  # and the series that moved most keeps its maximum beside them
            assert f"max {hi[2]} " in line or f"max=last {hi[2]}" in line, line
    assert rose >= 1
