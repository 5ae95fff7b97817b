"""Live scenario of `make test-integration` (issue 18, item 3): a real Prometheus, the real pipeline.

What runs, for real: Prometheus v0.316.0 (built from the Go module proxy by `deploy/local/gobin.py`,
cached in `~/.cache/incident-memory/gobin`) scraping, every second, the `/metrics` of this test's ingest, compactor,
projector and agent processes; those four services on the shared local Kafka and Postgres (per-test
topics and schema); the agent's tools through `incident-memory telemetry-mcp --backend http`.

The incident is about the pipeline itself: for 50 s someone sends the ingest Alertmanager webhooks
with a wrong token (answered 401), and for 15 s some with a bad body (400); then an alert
`IngestWebhooksUnauthorized` on the ingest container goes through the ingest like any alert. The agent (the deterministic local model, labelled as such:
`services/agent/stand_in_model.py`) plans its round-1 queries from the alert's labels; its
`query_prometheus` is `rate({__name__=~".+_requests_total",namespace="incident-memory",
container="ingest"}[5m])` over the alert's window, answered by the live Prometheus. The compactor's
digest of that real answer is what the test judges: within its budget, every series counted, values
copied from the raw, each line naming exactly one series, and the series that moved most (the 401s)
on a line of its own with its maximum as Prometheus gave it.

Loki is NOT used: it is AGPL-licensed, and the Go module proxy marks github.com/grafana/loki as not to
be used here. `LOKI_URL` points at a stand-in started by this test, labelled as such: it answers
Loki's `GET /loki/api/v1/query_range` with the recorded back end's own evaluator
(`telemetry_mcp.recorded.serve_loki`, the one that serves the seed incident's recorded Loki answers)
over the services' real JSON log lines of this run, one stream per service. The seed's own recorded
lines cannot answer here: they lie in another namespace and in a window of March 2026, and the
agent asks for this run's window. Kubernetes is not configured (`KUBERNETES_URL` unset): the
`get_pod_events` call gets the back end's truthful "not configured" error, recorded as its result.

Deselected from `make test` (tests/integration/conftest.py); about 2 minutes once Prometheus is built.
The logs, Prometheus's data and the thread's rows stay in `$INTEGRATION_DIR/live` (.cache/integration).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import shutil
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from deploy.local.pipeline import Pipeline, command
from services.runtime.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.stack, pytest.mark.timeout(900)]

# what the services must not inherit from the test's environment: the agent's tools go to the stand-ins
UNSET = ("LOKI_URL", "PROMETHEUS_URL", "TEMPO_URL", "KUBERNETES_URL", "KUBERNETES_SERVICE_HOST")
NAMESPACE = "incident-memory"
SERVICES = ("ingest", "compactor", "projector", "agent")
ALERTNAME = "IngestWebhooksUnauthorized"
# The load on the ingest, in seconds since it starts (the alert is sent at LIVE_S): (method, path, a
# good token?, body, requests per second, from, to). /healthz throughout; webhooks with a wrong token
# (401) from 20 s to 70 s; webhooks with the right token and a body that is not a notification (400)
# from 45 s to 60 s. Nothing of these reaches Kafka.
LIVE_S = 100.0
LOAD: tuple[tuple[str, str, bool, bytes | None, float, float, float], ...] = (
    ("GET", "/healthz", False, None, 2.0, 0.0, LIVE_S),
    ("POST", "/alertmanager", False, b'{"alerts": []}', 5.0, 20.0, 70.0),
    ("POST", "/alertmanager", True, b'{"version": "4"}', 3.0, 45.0, 60.0),
)
WINDOW_BEFORE_S = 150  # the alert's pinned window: [startsAt - 150 s, startsAt]
STEP_TIMEOUT_S = 120.0
COUNTS = re.compile(r"^(\d+) series, (\d+) samples")
STAT_WORDS = ("min", "max", "last", "max=last", "min=last", "to", "sample")


# ---- the Loki stand-in ------------------------------------------------------------------------


def _log_streams(logs: dict[str, Path]) -> dict[str, Any]:
    """The services' JSON log lines as a Loki `query_range` answer (one stream per service), newest
    first. A line that is not a JSON object with an ISO `ts` (a library writing its own text) is
    left out, as a Loki pipeline parsing JSON would drop it."""
    result = []
    for service, path in logs.items():
        values: list[list[str]] = []
        text = path.read_text(errors="replace") if path.exists() else ""
        for line in text.splitlines():
            try:
                record = json.loads(line)
                at = datetime.fromisoformat(str(record["ts"]))
            except (ValueError, KeyError, TypeError):
                continue
            values.append([str(int(at.timestamp() * 1000) * 1_000_000), line])
        values.sort(key=lambda v: -int(v[0]))
        if values:
            result.append({"stream": {"namespace": NAMESPACE, "container": service}, "values": values})
    return {"status": "success", "data": {"resultType": "streams", "result": result}}


class LokiStandIn:
    """NOT Loki (AGPL): `GET /loki/api/v1/query_range` answered by the recorded back end's evaluator
    over the live log files. Every answer it gives is kept, so the test can compare."""

    def __init__(self, logs: dict[str, Path]) -> None:
        from services.telemetry_mcp import recorded

        self.answers: list[tuple[dict[str, str], dict[str, Any]]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path != "/loki/api/v1/query_range":
                    self._send(404, {"status": "error", "error": f"not found: {url.path}"})
                    return
                params = dict(urllib.parse.parse_qsl(url.query))
                try:
                    answer = recorded.serve_loki(
                        _log_streams(logs),
                        params["query"],
                        params["start"],
                        params["end"],
                        int(params.get("limit", "100")),
                    )
                except Exception as exc:  # Loki answers a bad query with 400 and its reason
                    self._send(400, {"status": "error", "errorType": "bad_data", "error": str(exc)})
                    return
                stand_in.answers.append((params, answer))
                self._send(200, answer)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _prometheus_config(ports: dict[str, int]) -> str:
    """Each service a job, its target labelled with namespace and container as a Kubernetes scrape
    config's relabelling would: that is what the alert's labels and the agent's query refer to."""
    lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:"]
    for service, port in ports.items():
        lines += [
            f"  - job_name: {service}",
            "    static_configs:",
            f"      - targets: ['127.0.0.1:{port}']",
            f"        labels: {{namespace: {NAMESPACE}, container: {service}}}",
        ]
    return "\n".join(lines) + "\n"


def _scraped_up(prometheus_url: str) -> dict[str, str]:
    """job -> the value of `up` right now (1: the last scrape of its /metrics succeeded)."""
    try:
        answer = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": "up"}, timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return {s["metric"]["job"]: s["value"][1] for s in answer["data"]["result"]}


def _drive(
    stop: threading.Event,
    base: str,
    token: str,
    load: tuple[str, str, bool, bytes | None, float, float, float],
    t0: float,
) -> None:
    """Send one kind of request at its rate inside its time span, until `stop`."""
    method, path, good_token, body, per_s, since, until = load
    headers = {"Authorization": f"Bearer {token if good_token else 'not-the-token'}"} if body else {}
    sent = 0
    with httpx.Client(base_url=base, timeout=5) as client:
        while not stop.wait(0.02):
            t = time.monotonic() - t0
            if t >= until:
                return
            while t >= since and sent < (t - since) * per_s and not stop.is_set():
                sent += 1
                with contextlib.suppress(httpx.HTTPError):
                    client.request(method, path, headers=headers, content=body)


def _webhook(starts_at: datetime) -> dict[str, Any]:
    labels = {
        "alertname": ALERTNAME,
        "namespace": NAMESPACE,
        "container": "ingest",
        "service": "ingest",
        "severity": "warning",
    }
    annotations = {
        "summary": "ingest refuses Alertmanager webhooks (HTTP 401)",
        "description": 'rate(ingest_requests_total{endpoint="alertmanager",status="401"}[1m]) > 1',
    }
    at = starts_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{ALERTNAME}", run="{uuid.uuid4().hex[:8]}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "incident-memory",
        "groupLabels": {"alertname": ALERTNAME},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": "http://127.0.0.1:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": annotations,
                "startsAt": at,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "",
                "fingerprint": uuid.uuid4().hex[:16],
            }
        ],
    }


# ---- the scenario ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    thread_ts: str
    rows: list[dict[str, Any]]
    calls: dict[str, dict[str, Any]]  # tool_call_id -> {name, args}
    prometheus_url: str
    up_at_end: dict[str, str]
    loki_answers: list[tuple[dict[str, str], dict[str, Any]]]
    seconds: dict[str, float]
    root: Path

    def tool_row(self, tool: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the call the agent made, its tool row) for the one call of `tool`."""
        found = [
            (self.calls[r["tool_call_id"]], r)
            for r in self.rows
            if r["role"] == "tool" and self.calls.get(r["tool_call_id"], {}).get("name") == tool
        ]
        assert len(found) == 1, (tool, [r["id"] for r in self.rows])
        return found[0]


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Outcome]:
    from deploy.local.ports import free_port
    from deploy.local.prometheus import Server
    from deploy.local.prometheus import prometheus as build_prometheus
    from schemas.migrate import apply_migrations
    from schemas.topics import COMPACTED, DLQ, EVENTS, TOPICS, WAKE, ensure_topics

    started = time.monotonic()
    seconds: dict[str, float] = {}
    binary = build_prometheus()  # GoBuildFailed: a failure
    seconds["prometheus_binary"] = time.monotonic() - started
    # kept after the run, for reading: the services' logs, Prometheus's data and log, thread.json
    root = Path(os.environ.get("INTEGRATION_DIR") or ".cache/integration") / "live"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    bootstrap, dsn = stack.kafka_bootstrap_servers, stack.database_url
    suffix = uuid.uuid4().hex[:12]
    schema = f"t_live_{suffix}"
    topics = {spec.name: f"{spec.name}.{suffix}" for spec in TOPICS}
    ensure_topics(bootstrap, tuple(replace(spec, name=topics[spec.name]) for spec in TOPICS))
    with psycopg.connect(dsn, autocommit=True) as conn:
        apply_migrations(conn, schema=schema)
    names = {
        "events": topics[EVENTS],
        "compacted": topics[COMPACTED],
        "wake": topics[WAKE],
        "dlq": topics[DLQ],
    }
    pipe = Pipeline(bootstrap, dsn, schema, names, root, drop_env=UNSET)
    ports = {service: free_port() for service in SERVICES}
    loki = LokiStandIn({service: root / f"{service}.log" for service in SERVICES})
    prometheus = Server(binary, root, "prometheus", free_port(), _prometheus_config(ports))
    stop_load = threading.Event()

    def wait(what: str, check: Callable[[], Any]) -> Any:
        return pipe.wait_until(check, STEP_TIMEOUT_S, what, every=0.2)

    try:
        prometheus.start()
        token = uuid.uuid4().hex
        ingest_proc = pipe.ingest(
            ports["ingest"], uuid.uuid4().hex, token, "U0BOTMEM1",
            extra=["--window-before", str(WINDOW_BEFORE_S), "--window-after", "0"], team="T0LIVE", app="A0LIVE",
        )  # fmt: skip
        mcp = command("telemetry-mcp", "--backend", "http", "--prometheus-url", prometheus.url,
                      "--loki-url", loki.url, "--timeout", "20")  # fmt: skip
        started_procs = [
            ingest_proc,
            pipe.compactor(metrics_port=ports["compactor"]),
            pipe.projector(metrics_port=ports["projector"]),
            pipe.agent(metrics_port=ports["agent"], extra=["--mcp-command", shlex.join(mcp)]),
        ]
        ingest = f"http://127.0.0.1:{ports['ingest']}"
        for proc in started_procs:
            wait(f"{proc.name} ready", proc.ready or (lambda: True))
        wait(
            "Prometheus scraping all four services",
            lambda: _scraped_up(prometheus.url) == dict.fromkeys(SERVICES, "1"),
        )
        seconds["services_ready"] = time.monotonic() - started

        t0 = time.monotonic()
        threads = [
            threading.Thread(target=_drive, args=(stop_load, ingest, token, load, t0), daemon=True)
            for load in LOAD
        ]
        for thread in threads:
            thread.start()
        time.sleep(LIVE_S)
        stop_load.set()
        starts_at = datetime.now(UTC)
        answer = httpx.post(
            f"{ingest}/alertmanager",
            json=_webhook(starts_at),
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        thread_ts = str(answer.json()["thread_ts"])

        def round_posted() -> bool:
            with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
                row = conn.execute(
                    "SELECT count(*) FROM agent_messages WHERE thread_ts=%s AND round=1 AND role='post'",
                    (thread_ts,),
                ).fetchone()
            return bool(row and row[0])

        sent = time.monotonic()
        wait("round 1 committed", round_posted)
        seconds["alert_to_round_1"] = time.monotonic() - sent
        with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    "SELECT id, round, role, tool_call_id, content, compact, tokens FROM agent_messages "
                    "WHERE thread_ts = %s ORDER BY seq",
                    (thread_ts,),
                )
                .fetchall()
            )
        calls = {
            str(c["id"]): {"name": c["name"], "args": c.get("args") or {}}
            for r in rows
            if r["role"] == "ai"
            for c in (r["content"].get("tool_calls") or [])
        }
        up_at_end = _scraped_up(prometheus.url)
        seconds["scenario"] = time.monotonic() - started
        (root / "thread.json").write_text(json.dumps(rows, indent=1, default=str))
        print(f"\nlive scenario: logs, Prometheus data and the thread's rows (thread.json) in {root}")
        yield Outcome(thread_ts, rows, calls, prometheus.url, up_at_end, list(loki.answers), seconds, root)
    finally:
        stop_load.set()
        pipe.stop_all()
        prometheus.stop()
        loki.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_topics(
            [*topics.values(), pipe.names.selections], operation_timeout=10
        ).values():
            with contextlib.suppress(Exception):
                future.result(timeout=15)


# ---- what the test measures on the raw, by its own rules --------------------------------------------


def _span(series: dict[str, Any]) -> float:
    finite = [float(v) for _, v in series["values"] if math.isfinite(float(v))]
    return max(finite) - min(finite) if finite else 0.0


def _shown_values(line: str) -> list[str]:
    """Every number a digest line gives as a value (after min/max/last/to/flat at; both ends of a range)."""
    body = line.split("}: ", 1)[1]
    words = body.split(" ")
    out = []
    for i, word in enumerate(words):
        nxt = words[i + 1].rstrip(",;") if i + 1 < len(words) else ""
        after_at = i > 0 and words[i - 1] == "at"
        if (word in STAT_WORDS and not after_at) or (word == "at" and i and words[i - 1] == "flat"):
            out.extend(nxt.split("..") if ".." in nxt else [nxt])
        elif ".." in word and not word.startswith("(") and not word.endswith(")"):
            out.extend(word.rstrip(",;").split(".."))
    return out


def _labels_of(line: str) -> dict[str, str]:
    head = line.split("}: ", 1)[0]
    inside = head[head.index("{") + 1 :]
    return dict(p.split("=", 1) for p in inside.split(", ") if "=" in p)


# ---- the tests ---------------------------------------------------------------------------------------


def test_prometheus_scraped_every_service_and_the_round_committed(live: Outcome) -> None:
    assert live.up_at_end == dict.fromkeys(SERVICES, "1")
    roles = [r["role"] for r in live.rows]
    assert roles[0] == "alert" and "post" in roles
    names = sorted(c["name"] for c in live.calls.values())
    assert names == ["get_pod_events", "query_loki", "query_prometheus"], names
    print(f"\nlive scenario timings (s): { {k: round(v, 1) for k, v in live.seconds.items()} }")


def test_the_agent_got_the_live_prometheus_answer(live: Outcome) -> None:
    """The raw in the tool row is what the live Prometheus answers to the agent's very query: asked
    again now (the window ended before the agent asked, so nothing in it changes), it says the same.
    Its series are the ingest's own counters, scraped from its /metrics."""
    from services.telemetry_mcp.wire import prometheus_query_range

    call, row = live.tool_row("query_prometheus")
    args = call["args"]
    assert f'namespace="{NAMESPACE}",container="ingest"' in args["query"], args
    request = prometheus_query_range(args["query"], args["start"], args["end"], args["step"])
    again = httpx.get(live.prometheus_url + request.path, params=list(request.params), timeout=10).json()
    raw = row["content"]
    assert raw == again
    assert raw["status"] == "success" and raw["data"]["resultType"] == "matrix"
    result = raw["data"]["result"]
    assert result, "the live Prometheus had no series for the agent's query"
    for series in result:
        assert series["metric"]["job"] == "ingest" and series["metric"]["container"] == "ingest"
    refused = [s for s in result if s["metric"].get("status") == "401"]
    assert len(refused) == 1 and refused[0]["metric"]["endpoint"] == "alertmanager"
    assert max(float(v) for _, v in refused[0]["values"]) > 0, "the 401 burst is not in the answer"


def test_the_prometheus_digest_fits_its_budget_and_keeps_the_facts(live: Outcome) -> None:
    from schemas.tokens import count_value_tokens
    from services.compaction.registry import budget_for, compact_tool_result

    _, row = live.tool_row("query_prometheus")
    raw, compact = row["content"], row["compact"]
    budget = budget_for("query_prometheus")
    assert compact is not None and row["tokens"] == count_value_tokens(compact) <= budget
    result = raw["data"]["result"]
    summary = COUNTS.match(compact["summary"])
    assert summary is not None, compact
    assert (int(summary[1]), int(summary[2])) == (len(result), sum(len(s["values"]) for s in result))
    values = {v for s in result for _, v in s["values"]}
    for line in compact.get("series", []):
        for shown in _shown_values(line):
            assert shown in values, (shown, line)  # copied from the raw, never rounded into a new number
    # a line of one series names it: its labels pick exactly that one series of the answer
    for line in compact.get("series", []):
        if not re.match(r"\d+ series ", line):
            labels = _labels_of(line)
            named = [s for s in result if all(s["metric"].get(k) == v for k, v in labels.items())]
            assert len(named) == 1, (line, [s["metric"] for s in named])
    # the series that moved the most (the refused webhooks) has a line of its own naming it, with its
    # maximum as Prometheus gave it
    top = max(result, key=_span)
    assert top["metric"]["status"] == "401", top["metric"]
    own = [
        line
        for line in compact.get("series", [])
        if not re.match(r"\d+ series ", line)
        and all(top["metric"].get(k) == v for k, v in _labels_of(line).items())
        and _labels_of(line)
    ]
    assert len(own) == 1, compact
    top_max = max(top["values"], key=lambda p: float(p[1]))[1]
    assert f"max {top_max} " in own[0] or f"max=last {top_max}" in own[0], (top_max, own[0])
    # every label that varies across the answer's series is on each line (issue 18: `{status=401}`
    # alone did not say which endpoint refused)
    varying = {k for s in result for k in s["metric"] if len({r["metric"].get(k) for r in result}) > 1}
    for line in compact.get("series", []):
        if not re.match(r"\d+ series ", line):
            assert varying <= set(_labels_of(line)), (varying, line)
    # replaying the raw through the compactor gives the same digest (invariant 8), given the same
    # evidence id (the agent's: the row's id); another id's length leaves another room for the lines
    replayed = compact_tool_result("query_prometheus", raw, {"evidence_id": row["id"]}).compact
    assert replayed == compact
    print(
        f"\nquery_prometheus: {len(result)} series, digest {row['tokens']} tokens / budget {budget}; "
        f"raw {count_value_tokens(raw)} tokens\n" + json.dumps(compact, indent=1)
    )


def test_the_loki_stand_in_answer_is_digested_within_budget(live: Outcome) -> None:
    """Loki itself cannot run here (AGPL): the stand-in served the services' own log lines. What the
    agent stored is exactly what the stand-in answered, and its digest fits and counts every line."""
    from schemas.tokens import count_value_tokens
    from services.compaction.registry import budget_for

    call, row = live.tool_row("query_loki")
    assert call["args"]["query"] == f'{{namespace="{NAMESPACE}"}}'
    served = [answer for params, answer in live.loki_answers if params["query"] == call["args"]["query"]]
    assert len(served) == 1 and row["content"] == served[0]
    lines = sum(len(s["values"]) for s in served[0]["data"]["result"])
    assert lines > 0
    compact = row["compact"]
    budget = budget_for("query_loki")
    assert compact is not None and row["tokens"] == count_value_tokens(compact) <= budget
    assert compact["summary"].startswith(f"{lines} lines, "), compact  # every line counted
    # the story of the logs: each kind of refusal is a pattern with its exact count, largest first
    refusals = Counter(
        json.loads(line).get("reason")
        for s in served[0]["data"]["result"]
        for _, line in s["values"]
        if json.loads(line).get("msg") == "rejected"
    )
    assert set(refusals) == {"bad_token", "missing_field"}, refusals
    patterns = compact["patterns"]
    for k, (reason, n) in enumerate(refusals.most_common()):
        assert patterns[k].startswith(f"{n}× ") and reason in patterns[k], (reason, n, patterns)
    print(
        f"\nquery_loki (stand-in): {lines} lines, digest {row['tokens']} tokens / budget {budget}; "
        f"raw {count_value_tokens(row['content'])} tokens\n" + json.dumps(compact, indent=1)
    )


def test_unconfigured_kubernetes_is_a_truthful_tool_error(live: Outcome) -> None:
    _, row = live.tool_row("get_pod_events")
    assert "Kubernetes is not configured" in json.dumps(row["content"]), row["content"]
    assert row["compact"] is not None and "raw kept as evidence" in row["compact"]["error"], row["compact"]


def test_the_model_sees_the_reason_of_a_tool_error(live: Outcome) -> None:
    """Found live (issue 18): the digest said "raw format: expected a Kubernetes EventList" and the
    back end's own reason stayed in the raw. Now the digest is the tool's error, labelled as such."""
    from services.compaction.registry import budget_for

    _, row = live.tool_row("get_pod_events")
    error = row["compact"]["error"]
    assert "the tool's own error: " in error and "Kubernetes is not configured" in error, row["compact"]
    assert "raw format" not in error and "could not be compacted" not in error, error
    assert error.endswith(f"raw kept as evidence {row['id']}"), error
    assert row["tokens"] <= budget_for("get_pod_events")
    print(f"\nget_pod_events: digest {row['tokens']} tokens\n" + json.dumps(row["compact"], indent=1))


_TIMED = re.compile(r"\d+× (\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?(–(\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?)? ")


def test_the_largest_log_pattern_keeps_its_first_and_last_time(live: Outcome) -> None:
    """Found live (issue 18): the digest kept ten 1x start-up patterns and dropped the first/last time
    of its largest pattern (250 refusals). Each kept pattern now has its times, the largest its first
    and last as the raw has them, and the one-off lines are what is left out (counted)."""
    _, row = live.tool_row("query_loki")
    patterns = row["compact"]["patterns"]
    first = patterns[0]
    assert re.match(r"\d+× (\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?–", first), first
    for pattern in patterns:
        assert _TIMED.match(pattern), pattern
    times = sorted(
        int(ns)
        for s in row["content"]["data"]["result"]
        for ns, line in s["values"]
        if json.loads(line).get("reason") == "bad_token"
    )
    shown = [datetime.fromtimestamp(t / 1e9, UTC).strftime("%H:%M:%S") for t in (times[0], times[-1])]
    assert first.startswith(f"{len(times)}× {shown[0]}") and f"–{shown[1]}" in first, (shown, first)
