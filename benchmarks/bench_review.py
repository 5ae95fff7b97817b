"""The review page, server side: a 600-message thread's page and a 50,000-line raw's first page.

Both threads are written into a fresh schema in the projector's row shape (deploy/local/review_threads.py);
the page is served by uvicorn on loopback as the read-only review login, and each figure is the time from
request to the last byte of the answer over HTTP (httpx), so template rendering and the queries are in it.
The first request of a thread counts every row's raw tokens (remembered after: a raw never changes); the
figures after it are the steady state a reviewer sees. The targets: both under 300 ms.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import httpx
import psycopg

from deploy.local import asgi_thread
from deploy.local.pipeline import fresh_schema
from deploy.local.review_login import ensure_review_login
from deploy.local.review_threads import long_thread
from services.review.db import Reader
from services.review.web import build_app
from services.runtime.settings import Settings

MESSAGES, LOKI_LINES, RUNS = 600, 50_000, 15
TARGET_MS = 300.0


def _timed(http: httpx.Client, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    answer = http.get(path)
    took = (time.perf_counter() - started) * 1000
    answer.raise_for_status()
    return took, len(answer.content)


def _series(http: httpx.Client, path: str) -> dict[str, float]:
    cold, size = _timed(http, path)
    warm = sorted(_timed(http, path)[0] for _ in range(RUNS))
    return {"cold_ms": round(cold, 1), "median_ms": round(statistics.median(warm), 1),
            "p95_ms": round(warm[int(0.95 * (len(warm) - 1))], 1), "bytes": size}  # fmt: skip


def run(settings: Settings) -> dict[str, Any]:
    dsn = settings.database_url
    load = os.getloadavg()
    with fresh_schema(dsn) as schema:
        with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
            chat = long_thread(conn, "1710000000.000600", MESSAGES)
            logs = long_thread(conn, "1710000000.050000", 3, loki_lines=LOKI_LINES)
        reader = Reader(ensure_review_login(dsn), schema)
        sock, url = asgi_thread.listen()
        try:
            with asgi_thread.running(asgi_thread.server(build_app(reader), lifespan="off"), sock, "review"), \
                    httpx.Client(base_url=url, timeout=60) as http:  # fmt: skip
                thread = _series(http, f"/threads/{chat}")
                raw = _series(http, f"/threads/{logs}/rows/{logs}:1:tools:0")
        finally:
            reader.close()
    ok = thread["median_ms"] < TARGET_MS and raw["median_ms"] < TARGET_MS
    markdown = (
        f"A thread of {MESSAGES} human messages (plus its alert) and a Loki row of {LOKI_LINES:,} lines, served "
        f"by `incident-memory review`'s app on loopback as the read-only login; request to last byte over HTTP, "
        f"{RUNS} requests after a first (cold) one. Target: under {TARGET_MS:.0f} ms.\n\n"
        "| page | cold | median | p95 | answer |\n|---|---:|---:|---:|---:|\n"
        f"| thread of {MESSAGES + 1} rows | {thread['cold_ms']} ms | **{thread['median_ms']} ms** | "
        f"{thread['p95_ms']} ms | {thread['bytes']:,} B |\n"
        f"| {LOKI_LINES:,}-line raw, first page (200 lines) | {raw['cold_ms']} ms | **{raw['median_ms']} ms** | "
        f"{raw['p95_ms']} ms | {raw['bytes']:,} B |\n\n"
        f"{'Both under the target.' if ok else 'NOT under the target.'} The cold request counts the raw's tokens "
        "once (the 50,000-line raw's is most of its cold figure); the raw itself is paged in Postgres (a "
        "jsonpath slice of the stream a page covers, services/review/queries.py), never sent whole. "
        f"Load average before / after (2 cores, shared): {load[0]:.2f} / {os.getloadavg()[0]:.2f}.\n"
    )
    return {
        "title": "Review page (server side)",
        "markdown": markdown,
        "thread": thread,
        "raw": raw,
        "ok": ok,
    }
