"""A reply's thread lookup never holds up other requests: the real ingest server and broker, and a
database that accepts connections but never answers (a host behind a firewall that drops, or a
server stuck in recovery), so each lookup waits out its 2 s connect timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest

from .helpers import RunningServer, config, dumps, envelope, message, signed_headers, slack_ts, start_server


@pytest.fixture
def silent_database() -> Iterator[str]:
    """A DSN whose server accepts the TCP connection and then says nothing."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    worker = threading.Thread(target=accept, daemon=True)
    worker.start()
    yield f"postgresql://nobody@127.0.0.1:{listener.getsockname()[1]}/nowhere"
    stop.set()
    worker.join(timeout=5)
    for conn in accepted:
        conn.close()
    listener.close()


def _reply(server: RunningServer, thread_ts: str, n: int) -> httpx.Response:
    body = dumps(envelope(message(thread_ts, slack_ts(n), f"reply {n}")))
    return httpx.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body), timeout=30)


def test_a_lookup_that_hangs_does_not_hold_up_other_requests(
    kafka_bootstrap: str, topic_names: dict[str, str], silent_database: str
) -> None:
    server = start_server(config(kafka_bootstrap, topic_names, directory_dsn=silent_database))
    try:
        remembered, unseen = slack_ts(1000), slack_ts(2000)
        started = time.monotonic()
        assert _reply(server, remembered, 1).status_code == 200  # asks, waits out the timeout, remembers
        first_lookup_s = time.monotonic() - started
        assert first_lookup_s > 1.5  # the database really did hang the lookup

        with ThreadPoolExecutor(1) as pool:
            hanging: Future[httpx.Response] = pool.submit(_reply, server, unseen, 2)
            time.sleep(0.3)  # its lookup is now waiting on the silent database
            started = time.monotonic()
            other = _reply(server, remembered, 3)  # a thread this process remembers
            other_s = time.monotonic() - started
            health = httpx.get(f"{server.url}/healthz", timeout=30)
            assert other.status_code == 200 and health.status_code == 200
            assert other_s < 0.5, f"a remembered thread waited {other_s:.2f} s behind another's lookup"
            assert not hanging.done(), "the lookup should still be waiting on the silent database"
            assert hanging.result().status_code == 200  # the unanswered lookup: its own thread, no error
    finally:
        server.stop()
