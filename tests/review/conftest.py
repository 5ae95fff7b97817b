"""The review page's fixtures: its read-only login, a served page over a schema, the demo's thread."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from deploy.local import asgi_thread
from deploy.local.review_login import ensure_review_login
from services.review.db import Reader
from services.review.web import build_app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def review_dsn(pg_dsn: str) -> str:
    return ensure_review_login(pg_dsn)


@dataclass(frozen=True)
class Served:
    url: str
    reader: Reader


@contextmanager
def serve(
    dsn: str, schema: str, channels: frozenset[str] | None = None, redact: bool = True
) -> Iterator[Served]:
    reader = Reader(dsn, schema)
    sock, url = asgi_thread.listen()
    try:
        with asgi_thread.running(
            asgi_thread.server(build_app(reader, channels, redact=redact), lifespan="off"), sock, "review"
        ):
            yield Served(url, reader)
    finally:
        reader.close()


@pytest.fixture(scope="session")
def serve_schema(review_dsn: str) -> Callable[..., AbstractContextManager[Served]]:
    return lambda schema, channels=None, redact=True: serve(review_dsn, schema, channels, redact)


@dataclass(frozen=True)
class DemoThread:
    schema: str
    thread_ts: str
    output: str


@pytest.fixture(scope="session")
def demo_thread(stack: object, tmp_path_factory: pytest.TempPathFactory) -> DemoThread:
    """The seed incident run end to end by `incident-memory demo` (real services, Kafka, Postgres)."""
    cache = tmp_path_factory.mktemp("demo")
    done = subprocess.run(
        [sys.executable, "-m", "deploy.local.devcli", "demo", "--cache-dir", str(cache)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(r"`incident-memory show (\S+) --schema (\S+)`", done.stdout)
    assert found, done.stdout[-2000:]
    return DemoThread(schema=found.group(2), thread_ts=found.group(1), output=done.stdout)


@pytest.fixture
def owner_conn(pg_dsn: str, pg_schema: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        yield conn
