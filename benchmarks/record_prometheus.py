"""Record real Prometheus `query_range` answers as fixtures for the query_prometheus compactor (a dev tool).

    .venv/bin/python -m benchmarks.record_prometheus --out tests/compactor/fixtures/real/prometheus-v0.316.0
        [--prometheus BIN] [--seconds 120] [--ingest http://HOST:PORT] [--target HOST:PORT ...]

It runs a real Prometheus (`BIN`, else built and cached by `deploy.local.gobin`: PROMETHEUS_VERSION
from the Go module proxy) on a free port with its storage in a temporary directory and a scrape
interval of 1s. It scrapes itself, a second Prometheus (the "peer") and any `--target` (for
instance an ingest's /metrics; `--ingest URL` scrapes an ingest and sends it requests too). While it
runs:

- requests are sent to three of its HTTP API handlers, so that a handful of
  `prometheus_http_requests_total` series carry traffic while dozens sit at 0: `/api/v1/query`
  steadily, `/api/v1/labels` at a rate that climbs from a third of the run, `/api/v1/series` in a
  burst in the middle;
- the peer is stopped at 60% of the run and started again at 80%: its series get stale markers and
  are absent from `query_range` in between (and `up` is 0 there);
- with `--ingest`, the ingest gets GET /healthz steadily and, from 20% to 50% of the run, webhooks
  with a wrong token (answered 401: nothing reaches Kafka).

At the end it asks `query_range` for each query in `QUERIES` (over the whole run, or the window that
ends with it, at its step) and writes each body to `<name>.json` byte for byte as Prometheus
answered, and `recording.json`: the binary's module version (`go version -m`: a `go install` build
leaves `/api/v1/status/buildinfo`'s version empty), each query with its exact parameters, and the
timeline above. Nothing is edited: a fixture is what Prometheus said.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from deploy.local.ports import free_port
from deploy.local.prometheus import Server, prometheus

# name -> (PromQL, step in seconds, window in seconds: 0 for the run); a window ends with the run
QUERIES: dict[str, tuple[str, int, int]] = {
    # dozens of handlers, a few of them busy: the issue-18 probe's shape, at several resolutions
    "rate_http_requests": ("rate(prometheus_http_requests_total[30s])", 2, 0),
    "rate_http_requests_1m": ('rate(prometheus_http_requests_total{job="prometheus"}[1m])', 15, 0),
    "rate_http_requests_5m": ("rate(prometheus_http_requests_total[5m])", 15, 0),
    # the last hour, asked two minutes after Prometheus started: a handful of samples per series
    "rate_http_requests_1h": ('rate(prometheus_http_requests_total{job="prometheus"}[1m])', 30, 3600),
    # many series of one metric (handler x le): the buckets above every observation are twins
    "rate_duration_buckets": ("rate(prometheus_http_request_duration_seconds_bucket[30s])", 2, 0),
    # 0/0 for every idle handler: "NaN" samples beside real latencies
    "mean_latency": (
        "rate(prometheus_http_request_duration_seconds_sum[30s])"
        " / rate(prometheus_http_request_duration_seconds_count[30s])",
        2,
        0,
    ),
    # the peer's series stop (stale markers: absent points) and come back
    "goroutines": ("go_goroutines", 2, 0),
    "up": ("up", 2, 0),
    # several metric names, both jobs
    "process": ('{__name__=~"process_.*"}', 2, 0),
    # an ingest's own counters (empty without --ingest)
    "rate_ingest_requests": ("rate(ingest_requests_total[30s])", 2, 0),
}


def config(self_port: int, peer_port: int, targets: list[str], ingest: str | None = None) -> str:
    jobs = [("prometheus", f"127.0.0.1:{self_port}"), ("peer", f"127.0.0.1:{peer_port}")]
    jobs += [(f"target{i}", t) for i, t in enumerate(targets, start=1)]
    jobs += [("ingest", ingest)] if ingest else []
    lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:"]
    for job, target in jobs:
        lines += [f"  - job_name: {job}", "    static_configs:", f"      - targets: ['{target}']"]
    return "\n".join(lines) + "\n"


Load = tuple[str, str, Callable[[float], float]]  # (method, url, requests per second at t seconds)


def _load(stop: threading.Event, method: str, url: str, rate: Callable[[float], float], t0: float) -> None:
    """Send `method url` at `rate(seconds since t0)` requests per second until `stop`. A POST carries
    an empty Alertmanager body and a wrong bearer token: refused (401), nothing is recorded."""
    headers = {"Authorization": "Bearer not-the-token"} if method == "POST" else {}
    body = b'{"alerts": []}' if method == "POST" else None
    credit, last = 0.0, time.monotonic()
    with httpx.Client(timeout=5) as client:
        while not stop.wait(0.02):  # the rate is read again every tick: a slow start does not stall
            now = time.monotonic()
            credit = min(credit + rate(now - t0) * (now - last), 5.0)
            last = now
            while credit >= 1 and not stop.is_set():
                credit -= 1
                with contextlib.suppress(httpx.HTTPError):
                    client.request(method, url, headers=headers, content=body)


def record(binary: Path, out: Path, seconds: float, targets: list[str], ingest: str | None) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="record-prometheus-"))
    main_port, peer_port = free_port(), free_port()
    ingest_target = ingest.split("//", 1)[-1].rstrip("/") if ingest else None
    main = Server(binary, home, "main", main_port, config(main_port, peer_port, targets, ingest_target))
    peer = Server(binary, home, "peer", peer_port, _self_only(peer_port))
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        main.start()
        peer.start()
        t0 = time.monotonic()
        start_unix = time.time()
        api = main.url + "/api/v1"
        loads: list[Load] = [
            ("GET", f"{api}/query?query=up", lambda t: 4.0),
            (
                "GET",
                f"{api}/labels",
                lambda t: 0.0 if t < seconds / 3 else 10.0 * (t - seconds / 3) / seconds,
            ),
            (
                "GET",
                f"{api}/series?match[]=up",
                lambda t: 8.0 if 0.4 * seconds <= t < 0.55 * seconds else 0.0,
            ),
        ]
        if ingest:
            loads += [
                ("GET", f"{ingest.rstrip('/')}/healthz", lambda t: 2.0),
                (
                    "POST",
                    f"{ingest.rstrip('/')}/alertmanager",
                    lambda t: 3.0 if 0.2 * seconds <= t < 0.5 * seconds else 0.0,
                ),
            ]
        for method, url, rate in loads:
            thread = threading.Thread(target=_load, args=(stop, method, url, rate, t0), daemon=True)
            thread.start()
            threads.append(thread)
        timeline = []
        for at, action in ((0.6, peer.stop), (0.8, peer.start)):
            time.sleep(max(0.0, t0 + at * seconds - time.monotonic()))
            action()
            timeline.append({"at_s": round(time.monotonic() - t0, 1), "peer": action.__name__})
        time.sleep(max(0.0, t0 + seconds - time.monotonic()))
        stop.set()
        for thread in threads:
            thread.join(5)
        end_unix = time.time()
        start, end = int(start_unix) + 1, int(end_unix)
        out.mkdir(parents=True, exist_ok=True)
        build = httpx.get(f"{api}/status/buildinfo", timeout=10).json()["data"]
        recorded: dict[str, dict[str, Any]] = {}
        for name, (query, step, window) in QUERIES.items():
            since = end - window if window else start
            params = {"query": query, "start": str(since), "end": str(end), "step": str(step)}
            response = httpx.get(f"{api}/query_range", params=params, timeout=30)
            if response.status_code != 200:  # said in recording.json, not written as a fixture
                recorded[name] = {"params": params, "error": f"HTTP {response.status_code}: {response.text}"}
                continue
            (out / f"{name}.json").write_bytes(response.content)
            recorded[name] = {"path": "/api/v1/query_range", "params": params, "bytes": len(response.content)}
        meta = {
            "buildinfo": {k: build.get(k) for k in ("version", "revision", "goVersion")},
            "binary": _module_line(binary),
            "scrape_interval": "1s",
            "jobs": {
                "prometheus": "itself",
                "peer": "a second Prometheus",
                **{f"target{i}": t for i, t in enumerate(targets, start=1)},
                **({"ingest": f"incident-memory ingest at {ingest_target}"} if ingest_target else {}),
            },
            "seconds": seconds,
            "load": {
                "/api/v1/query": "4/s throughout",
                "/api/v1/labels": "0 until a third of the run, then climbing to ~6.7/s",
                "/api/v1/series": "8/s from 40% to 55% of the run",
                **(
                    {
                        "ingest /healthz": "2/s throughout",
                        "ingest POST /alertmanager, wrong token (401)": "3/s from 20% to 50% of the run",
                    }
                    if ingest
                    else {}
                ),
            },
            "peer_timeline": timeline,
            "queries": recorded,
        }
        (out / "recording.json").write_text(json.dumps(meta, indent=2) + "\n")
        return meta
    finally:
        stop.set()
        peer.stop()
        main.stop()
        shutil.rmtree(home, ignore_errors=True)


def _module_line(binary: Path) -> str:
    """`go version -m`'s main module line (`mod <path> <version> <sum>`): `go install` leaves
    buildinfo's version empty, so this is what says which Prometheus answered."""
    from deploy.local import gobin

    go = gobin.find_go()
    if go is None:
        return "unknown (no go to read the binary's module)"
    out = subprocess.run([str(go), "version", "-m", str(binary)], capture_output=True, text=True).stdout
    mods = [line.split("\t")[1:5] for line in out.splitlines() if line.strip().startswith("mod")]
    return " ".join(mods[0]) if mods else "unknown"


def _self_only(port: int) -> str:
    return (
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: prometheus\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prometheus", type=Path, default=None, help="binary (default: built and cached)")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--target", action="append", default=[], help="another HOST:PORT to scrape")
    parser.add_argument(
        "--ingest",
        default=None,
        help="an ingest's base URL (http://HOST:PORT): scraped, and sent /healthz and refused webhooks",
    )
    args = parser.parse_args()
    binary = args.prometheus
    if binary is None:
        binary = prometheus()
    meta = record(binary, args.out, args.seconds, args.target, args.ingest)
    print(json.dumps(meta, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
