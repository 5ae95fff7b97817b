"""Live monitoring check of `make test-integration` (issue 39): the dashboard, the SLO recording rules and
the lag alert, against a real Prometheus scraping the real services.

What runs, for real: Prometheus v0.316.0 (deploy/local/prometheus.py, built from the Go module proxy)
scraping every second the `/metrics` of this test's ingest, compactor, projector, agent and Slack poster,
on the shared local Kafka and Postgres (per-test topics and schema), the poster speaking to the Slack
stand-in (deploy/local/slack_standin.py: Slack cannot be reached here). The agent runs the deterministic
local model (services/agent/stand_in_model.py, not an LLM) on the recorded telemetry back end.

The work: the seed incident's alert (round 1, posted by the poster), the humans' replies and a mention
written now (round 2), a malformed record on incident.events (the compactor dead-letters it), and
webhooks with a wrong token (ingest refuses them). Then:
- every panel's PromQL, read from the dashboard JSON with its variables substituted, is run as Grafana
  runs it (a range query over the run) and must return data; the test lists the panels that returned none;
- the SLO recording rules (as shipped) have recorded both SLIs;
- the fault: the projector is stopped while Slack messages keep coming, and
  `IncidentMemoryProjectorLagGrowing` fires in Prometheus (`/api/v1/alerts`). Prometheus evaluates the
  production alert rules with every duration divided by 15 (deploy/local/monitoring.py: `for: 5m` becomes
  20 s, a `[5m]` window 20 s): the shipped values would make the test wait over ten minutes. The same
  scaled rules also fire `IncidentMemoryEventsDeadLettered` on the malformed record.

Deselected from `make test` (tests/integration/conftest.py). Logs, the rule files and Prometheus's data stay
in `$INTEGRATION_DIR/monitoring` (.cache/integration).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from deploy.local import monitoring
from deploy.local.pipeline import Names, Pipeline, Proc
from services.runtime.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.stack, pytest.mark.timeout(900)]

UNSET = ("LOKI_URL", "PROMETHEUS_URL", "TEMPO_URL", "KUBERNETES_URL", "KUBERNETES_SERVICE_HOST")
NAMESPACE = "incident-memory"
SERVICES = ("ingest", "compactor", "projector", "agent", "slack")
SCALE = 15  # the alert rules' durations divided by this (module docstring)
STEP_TIMEOUT_S = 120.0
# Series that exist only once their fault happened: labelled by the fault's own reason (an open set), so a
# run without that fault has no series to show (its panel's other queries still must return data). Every
# closed set of labels is created at 0 by the services (tests/test_metrics_initialised.py).
FAULT_ONLY = {
    "ingest_dead_letters_total": "the alerts consumer dead-letters a record (ingest --alerts-topic, not run here)",
}


@dataclass
class Run:
    prometheus_url: str
    pipe: Pipeline
    procs: dict[str, Proc]
    thread_ts: str
    root_ts: str
    channel: str
    ingest_url: str
    secret: str
    started_at: float  # unix time
    worked_until: float  # unix time: the pipeline's work done, before the fault
    root: Path


def _query(url: str, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": expr, **({"time": str(at)} if at else {})}
    answer = httpx.get(f"{url}/api/v1/query", params=params, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _query_range(url: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = {"query": expr, "start": str(start), "end": str(end), "step": str(step)}
    answer = httpx.get(f"{url}/api/v1/query_range", params=params, timeout=20).json()
    assert answer["status"] == "success", (expr, answer)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _has_data(series: list[dict[str, Any]]) -> bool:
    """At least one finite sample: what Grafana draws (NaN, e.g. a quantile of no observations, is a gap)."""
    return any(math.isfinite(float(v)) for s in series for _, v in s.get("values") or [s["value"]])


def _up(url: str) -> dict[str, str]:
    try:
        return {s["metric"]["job"]: s["value"][1] for s in _query(url, "up")}
    except (httpx.HTTPError, ValueError, AssertionError):
        return {}


def _firing(url: str, alertname: str) -> list[dict[str, Any]]:
    alerts = httpx.get(f"{url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]


def _rule_files(root: Path) -> list[Path]:
    rules = monitoring.load_rules()
    slo, alerts = root / "slo.rules.yml", root / f"alerts.scaled-{SCALE}.rules.yml"
    slo.write_text(yaml.safe_dump(monitoring.slo_rules(rules), sort_keys=False))
    alerts.write_text(yaml.safe_dump(monitoring.scaled_alerts(rules, SCALE), sort_keys=False))
    return [slo, alerts]


def _send_thread(run_: Run, client: httpx.Client, humans: list[tuple[str, str, bool]]) -> None:
    """Signed Slack events into the alert's thread, each with a ts of now."""
    from deploy.local.demo import post_slack, slack_envelope, slack_event

    for user, text, mention in humans:
        ts = f"{time.time():.6f}"
        event = slack_event(
            "app_mention" if mention else "message", run_.root_ts, ts, user, text, run_.channel
        )
        post_slack(client, run_.secret, slack_envelope(event, f"Ev{secrets.token_hex(6).upper()}"))
        time.sleep(0.01)


@pytest.fixture(scope="module")
def run(stack: Settings) -> Iterator[Run]:
    from deploy.local.demo import recorded, round_posted, slack_side
    from deploy.local.ports import free_port
    from deploy.local.prometheus import Server
    from deploy.local.prometheus import prometheus as build_prometheus
    from deploy.local.seed import seed_incident
    from schemas.topics import COMPACTED, DLQ, EVENTS, WAKE

    binary = build_prometheus()  # GoBuildFailed: a failure
    # absolute: Prometheus resolves rule_files against its configuration file's folder
    root = (Path(os.environ.get("INTEGRATION_DIR") or ".cache/integration") / "monitoring").resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    suffix = secrets.token_hex(4)
    # topics named as production's plus a suffix: the rules and panels select `topic=~"incident\\.events.*"`
    topics = {key: f"{name}.{suffix}" for key, name in (("events", EVENTS), ("compacted", COMPACTED),
              ("wake", WAKE), ("dlq", DLQ), ("selections", "incident.selections"))}  # fmt: skip
    names = Names(f"mon.{suffix}", f"t_mon_{suffix}", topics)
    secret, token = secrets.token_hex(16), secrets.token_hex(16)
    from deploy.local.demo import APP_ID, BOT_USER_ID, TEAM_ID

    pipe = Pipeline(
        stack.kafka_bootstrap_servers, stack.database_url, names.schema, names.topics, root,
        prefix=names.prefix, drop_env=UNSET,
        extra_env={"SLACK_SIGNING_SECRET": secret, "ALERTMANAGER_TOKEN": token, "SLACK_BOT_USER_ID": BOT_USER_ID,
                   "SLACK_TEAM_ID": TEAM_ID, "SLACK_APP_ID": APP_ID},
    )  # fmt: skip
    pipe.provision()
    ports = {service: free_port() for service in SERVICES}
    config = monitoring.prometheus_config(ports, NAMESPACE, _rule_files(root))
    prometheus = Server(binary, root, "prometheus", free_port(), yaml.safe_dump(config, sort_keys=False))
    seed = seed_incident()
    try:
        prometheus.start()
        groups = httpx.get(f"{prometheus.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
        assert sorted(g["name"] for g in groups) == [monitoring.ALERT_GROUP, monitoring.SLO_GROUP], groups
        started_at = time.time()
        side = slack_side(pipe, STEP_TIMEOUT_S)
        metrics = ["--metrics-port"]
        procs = {
            "slack": pipe.slack(side.api_url, side.bot_token, default_channel=side.channel,
                                extra=[*metrics, str(ports["slack"])]),
            "ingest": pipe.ingest(ports["ingest"]),
            "compactor": pipe.compactor(metrics_port=ports["compactor"]),
            "projector": pipe.projector(metrics_port=ports["projector"]),
            "agent": pipe.agent(metrics_port=ports["agent"], extra=["--model", "local", "--judge-model", "local"]),
        }  # fmt: skip
        pipe.wait_ready(*procs.values(), timeout=STEP_TIMEOUT_S)
        pipe.wait_until(lambda: _up(prometheus.url) == dict.fromkeys(SERVICES, "1"), STEP_TIMEOUT_S,
                        "Prometheus scraping all five services", every=0.5)  # fmt: skip
        ingest_url = f"http://127.0.0.1:{ports['ingest']}"
        dsn, schema = stack.database_url, names.schema
        with httpx.Client(base_url=ingest_url, timeout=10) as client:
            answer = client.post("/alertmanager", json=seed.alertmanager_webhook,
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip
            assert answer.status_code == 200, answer.text
            thread_ts = str(answer.json()["thread_ts"])
            channel, root_ts = pipe.wait_until(recorded(dsn, schema, f"{thread_ts}:-:alert:0"), STEP_TIMEOUT_S,
                                               "the alert posted to Slack")  # fmt: skip
            pipe.wait_until(round_posted(dsn, schema, thread_ts, 1), STEP_TIMEOUT_S, "round 1")
            run_ = Run(prometheus.url, pipe, procs, thread_ts, root_ts, channel, ingest_url, secret,
                       started_at, 0.0, root)  # fmt: skip
            _send_thread(run_, client, [(h.user, h.text, h.mention) for h in seed.humans])
            pipe.wait_until(round_posted(dsn, schema, thread_ts, 2), STEP_TIMEOUT_S, "round 2")
            pipe.wait_until(recorded(dsn, schema, f"{thread_ts}:2:post:0"), STEP_TIMEOUT_S, "round 2 posted")
            for _ in range(20):  # refused: a wrong token (ingest_rejections_total, requests{status="401"})
                client.post("/alertmanager", json={"alerts": []}, headers={"Authorization": "Bearer nope"})
        from deploy.local.pipeline import produce

        produce(stack.kafka_bootstrap_servers, names.topics["events"], [(b"k", b"{not an event")])
        pipe.wait_until(lambda: procs["compactor"].metric("compactor_dlq_total") >= 1, STEP_TIMEOUT_S,
                        "the compactor dead-letters the malformed record")  # fmt: skip
        time.sleep(5)  # a few scrapes after the last of the work
        run_.worked_until = time.time()
        yield run_
    finally:
        pipe.stop_all()
        prometheus.stop()
        pipe.deprovision()


def test_every_dashboard_panel_returns_data_from_the_live_prometheus(run: Run) -> None:
    """Each panel's queries as Grafana runs them: a range query over the run, `$__rate_interval` at four
    scrape intervals (Grafana's floor), every other variable as a user of this namespace picks it."""
    dashboard = json.loads(monitoring.DASHBOARD.read_text())
    variables = {"namespace": NAMESPACE, "__rate_interval": "15s", "model_input_budget": "8000"}
    queries = monitoring.panel_queries(dashboard, variables)
    assert len({q.panel for q in queries}) >= 10, queries
    empty = [q for q in queries if not _has_data(_query_range(run.prometheus_url, q.expr, run.started_at,
                                                              run.worked_until, 2))]  # fmt: skip
    panels_without_data = sorted({q.panel for q in queries} - {q.panel for q in queries if q not in empty})
    unexplained = [q for q in empty if not any(marker in q.expr for marker in FAULT_ONLY)]
    print(
        "\nqueries without data (fault-only series):\n" + "\n".join(f"  {q.panel}: {q.expr}" for q in empty)
    )
    assert panels_without_data == [], f"panels that returned no data: {panels_without_data}"
    assert unexplained == [], "queries without data:\n" + "\n".join(
        f"{q.panel}: {q.expr}" for q in unexplained
    )


def test_the_slo_recording_rules_record_both_slis(run: Run) -> None:
    """The shipped SLO rules (5-minute windows, evaluated every 30 s) over the run: a Slack message became
    its row within 5 s, and the mention (written now) was answered within 60 s, as ratios in [0, 1]."""
    url = run.prometheus_url
    found: dict[str, float] = {}

    def recorded() -> bool:
        for name in ("incident_memory:message_to_row:good_ratio_5m", "incident_memory:mention_to_posts:good_ratio_5m",
                     "incident_memory:message_to_row_seconds:p99_5m", "incident_memory:mention_to_posts_seconds:p95_5m",
                     "incident_memory:message_to_row:target", "incident_memory:mention_to_posts:target"):  # fmt: skip
            series = [s for s in _query(url, name) if math.isfinite(float(s["value"][1]))]
            if not series:
                return False
            found[name] = float(series[0]["value"][1])
        return True

    try:
        run.pipe.wait_until(recorded, 90, "the SLO recording rules evaluated", every=1)
    finally:
        les = {s["metric"]["le"] for s in _query(url, "agent_trigger_to_commit_seconds_bucket")}
        print(f"\nSLO series found: {found}; agent_trigger_to_commit_seconds_bucket le values: {sorted(les)}")
    assert found["incident_memory:message_to_row:target"] == 0.99
    assert found["incident_memory:mention_to_posts:target"] == 0.95
    assert 0 <= found["incident_memory:message_to_row:good_ratio_5m"] <= 1
    assert (
        found["incident_memory:mention_to_posts:good_ratio_5m"] == 1.0
    )  # the one mention, answered in < 60 s
    assert 0 < found["incident_memory:mention_to_posts_seconds:p95_5m"] <= 60


def test_dead_letter_alert_fired_on_the_malformed_record(run: Run) -> None:
    """It fired during the run (ALERTS, Prometheus's own record of its alerts): the scaled window (60 s) may
    have passed by now, and the alert resolved with it."""
    expr = 'max_over_time(ALERTS{alertname="IncidentMemoryEventsDeadLettered", alertstate="firing"}[15m])'
    fired = run.pipe.wait_until(
        lambda: _query(run.prometheus_url, expr), 30, "EventsDeadLettered fired", every=1
    )
    assert {(a["metric"]["service"], a["metric"]["namespace"]) for a in fired} == {("compactor", NAMESPACE)}


def test_stopping_the_projector_fires_the_lag_alert(run: Run) -> None:
    """The projector stops; Slack messages keep coming; the compactor keeps emitting them. Before the stop
    the alert is not firing, after it it fires (the scaled rules, module docstring)."""
    url = run.prometheus_url
    assert _firing(url, "IncidentMemoryProjectorLagGrowing") == []
    run.procs["projector"].stop()
    stop = threading.Event()

    def keep_talking() -> None:
        with httpx.Client(base_url=run.ingest_url, timeout=10) as client:
            while not stop.wait(0.5):
                _send_thread(run, client, [("U0SRE00001", "still seeing 502s on checkout", False)])

    talker = threading.Thread(target=keep_talking, daemon=True)
    talker.start()
    try:
        stopped = time.monotonic()
        alerts = run.pipe.wait_until(lambda: _firing(url, "IncidentMemoryProjectorLagGrowing"), 180,
                                     "IncidentMemoryProjectorLagGrowing firing", every=1)  # fmt: skip
        print(f"\nlag alert firing {time.monotonic() - stopped:.0f} s after the projector stopped: {alerts}")
    finally:
        stop.set()
        talker.join(15)
    (alert,) = alerts
    assert alert["labels"]["namespace"] == NAMESPACE and alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["runbook_url"].endswith("/IncidentMemoryProjectorLagGrowing.md")
    assert _query(url, 'up{job="projector"}')[0]["value"][1] == "0"
