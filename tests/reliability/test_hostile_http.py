"""Issue 17's reliability run: 20 slowloris connections and 4 parallel 100 MB headers against a real
`incident-memory ingest` (its default limits, the real broker), while a client keeps sending valid
signed Slack messages. Those must stay within 50 ms p99, and ingest's RSS within 100 MB of its
baseline; every message answered 200 must be on the events topic."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from schemas.events import parse_event
from services.ingest.slack_signature import sign

from .harness import Pipeline, Proc, free_port, read_all, wait_until

pytestmark = pytest.mark.reliability
SECRET, TOKEN, BOT = "8f742231b10e8888abcd99yyyzzz85a5", "am-test-token", "U0LAN0Z89"
ROOT = Path(__file__).resolve().parents[2]
ATTACK_S = float(os.environ.get("HOSTILE_ATTACK_S", "30"))  # > the 10 s header timeout: slowloris cycles
P99_LIMIT_S = 0.050
RSS_LIMIT_MB = 100.0


def _signed(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": sign(SECRET, ts, body)}  # fmt: skip


def _message(thread: str, n: int) -> tuple[str, bytes]:
    seconds, micros = thread.split(".")
    ts = f"{seconds}.{(int(micros) + n + 1) % 1_000_000:06d}"
    event = {"type": "message", "channel": "C123ABC456", "user": "U123ABC456", "text": f"still 502s {n}",
             "ts": ts, "thread_ts": thread, "event_ts": ts, "channel_type": "channel"}  # fmt: skip
    envelope = {"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456", "event": event,
                "type": "event_callback", "event_id": f"Ev{uuid.uuid4().hex[:12]}", "event_time": int(time.time())}  # fmt: skip
    return ts, json.dumps(envelope).encode()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.samples.append(_rss_mb(self.pid))
            self.halt.wait(0.1)


def _p(values: list[float], q: int) -> float:
    """The q-th percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _send(client: httpx.Client, url: str, thread: str, first: int, seconds: float, rate: float,
          latencies: list[float], acked: set[str]) -> int:  # fmt: skip
    """Signed Slack messages at `rate`/s for `seconds`, one at a time; returns how many were sent."""
    n, start = first, time.monotonic()
    while time.monotonic() - start < seconds:
        ts, body = _message(thread, n)
        t0 = time.perf_counter()
        status = client.post(url, content=body, headers=_signed(body)).status_code
        latencies.append(time.perf_counter() - t0)
        assert status == 200, f"message {n}: {status}"
        acked.add(ts)
        n += 1
        time.sleep(max(0.0, start + (n - first) / rate - time.monotonic()))
    return n


def _metric(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def _run(pipeline: Pipeline, pause: float) -> tuple[dict[str, object], list[float], float, float]:
    """Calm traffic, then the same traffic during the attack; returns the figures, the attacked
    latencies, the RSS baseline and the largest RSS sampled during the attack."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ingest = pipeline.ingest(port, SECRET, TOKEN, BOT, team="T123ABC456", app="A123ABC456")
    assert ingest.popen is not None
    thread = f"{int(time.time()) - 3600}.{uuid.uuid4().int % 100_000:06d}"
    acked: set[str] = set()
    with httpx.Client(timeout=10) as client:  # keep-alive, as Slack's deliveries
        url = f"{base}/slack/events"
        wait_until(lambda: _healthy(client, base), 60, "ingest to answer /healthz")
        n = _send(client, url, thread, 0, 3.0, 20, [], acked)  # warm-up (producer, connections)
        calm: list[float] = []
        n = _send(client, url, thread, n, 10.0, 20, calm, acked)
        baseline = _rss_mb(ingest.popen.pid)
        cpu_before = _cpu_s(ingest.popen.pid)
        sampler = RssSampler(ingest.popen.pid)
        sampler.start()
        argv = [sys.executable, "-m", "tests.reliability.hostile_http", str(port), str(ATTACK_S), "20", "4",
                "100", str(pause)]  # fmt: skip
        attacker = Proc("attacker", argv, dict(os.environ), pipeline.root / "attacker.out", cwd=ROOT,
                        err_log=pipeline.root / "attacker.err").start()  # fmt: skip
        try:
            time.sleep(1.0)  # the attack is under way
            attacked: list[float] = []
            n = _send(client, url, thread, n, ATTACK_S - 2.0, 20, attacked, acked)
            attacker.wait(ATTACK_S + 60)
        finally:
            attacker.stop()  # a no-op once it has ended on its own
        out = attacker.text()  # its report: one JSON line on stdout
        cpu_attack = _cpu_s(ingest.popen.pid) - cpu_before
        sampler.halt.set()
        sampler.join(5)
        after = _rss_mb(ingest.popen.pid)
        metrics = client.get(f"{base}/metrics").text
    attack = json.loads(out)
    assert ingest.alive()
    produced = {
        getattr(parse_event(m.value()), "ts", None)
        for m in read_all(pipeline.bootstrap, pipeline.topics["events"])
    }
    lost = acked - produced
    figures: dict[str, object] = {
        "big_header_pause_s": pause, "attack_s": ATTACK_S,
        "requests_calm": len(calm), "calm_p50_ms": round(_p(calm, 50) * 1000, 1),
        "calm_p99_ms": round(_p(calm, 99) * 1000, 1), "calm_max_ms": round(max(calm) * 1000, 1),
        "requests_attacked": len(attacked), "attacked_p50_ms": round(_p(attacked, 50) * 1000, 1),
        "attacked_p99_ms": round(_p(attacked, 99) * 1000, 1), "attacked_max_ms": round(max(attacked) * 1000, 1),
        "rss_baseline_mb": round(baseline, 1), "rss_max_mb": round(max(sampler.samples), 1),
        "rss_after_mb": round(after, 1), "ingest_cpu_s_during_attack": round(cpu_attack, 1),
        "acked": len(acked), "lost": len(lost),
        "refused_431": _metric(metrics, "ingest_http_refused_total", status="431"),
        "refused_408_header": _metric(metrics, "ingest_http_refused_total", status="408", reason="header_timeout"),
        **attack,
    }  # fmt: skip
    print(json.dumps(figures))
    assert not lost, f"{len(lost)} acked messages not on the topic"
    assert attack["big_sent_mib_max"] < 100, "a 100 MB header was read to its end"
    assert attack["slowloris_held_s_max"] < 10 + 2, "a slowloris connection outlived the header timeout"
    assert attack["slowloris_answers"].get("408", 0) >= 20, attack
    return figures, attacked, baseline, max(sampler.samples)


def test_slowloris_and_100_mb_headers_leave_signed_requests_fast_and_rss_bounded(
    pipeline: Pipeline, record: dict[str, object]
) -> None:
    """Issue 17's run: 20 slowloris connections (each reconnects as soon as it is closed) and 4
    parallel streams of 100 MB headers (each starts a new one 1 s after the last was cut off)."""
    figures, attacked, baseline, peak = _run(pipeline, pause=1.0)
    record.update(figures)
    assert _p(attacked, 99) <= P99_LIMIT_S, figures
    assert peak - baseline <= RSS_LIMIT_MB, figures


def test_a_flood_of_100_mb_headers_costs_latency_not_memory(
    pipeline: Pipeline, record: dict[str, object]
) -> None:
    """The same, but each 100 MB-header stream reconnects at once: a connection flood (~1,000+/s on
    loopback, the attacker on the same two cores). Each costs ingest a connection, a 431 and a close;
    what that costs valid requests is recorded, not held to 50 ms (the bound here is CPU, as for any
    connection flood); memory stays bounded and nothing acked is lost."""
    figures, _attacked, baseline, peak = _run(pipeline, pause=0.0)
    record.update(figures)
    assert peak - baseline <= RSS_LIMIT_MB, figures


def _healthy(client: httpx.Client, base: str) -> bool:
    try:
        return client.get(f"{base}/healthz").status_code == 200
    except httpx.TransportError:
        return False
