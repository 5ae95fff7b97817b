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
import psycopg
import pytest

from deploy.local import loopback_http
from schemas.ids import thread_key
from services.ingest.directory import LookupNeeded, ThreadDirectory

from .helpers import (
    RunningServer,
    config,
    dumps,
    envelope,
    message,
    read_events,
    signed_headers,
    slack_ts,
    start_server,
)


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
    return loopback_http.post(
        f"{server.url}/slack/events", content=body, headers=signed_headers(body), timeout=30
    )


@pytest.mark.serial  # bounds a remembered thread's answer in wall-clock time: alone, not under -n
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
            health = loopback_http.get(f"{server.url}/healthz", timeout=30)
            assert other.status_code == 200 and health.status_code == 200
            assert other_s < 0.5, f"a remembered thread waited {other_s:.2f} s behind another's lookup"
            assert not hanging.done(), "the lookup should still be waiting on the silent database"
            assert hanging.result().status_code == 200  # the unanswered lookup: its own thread, no error
    finally:
        server.stop()


def test_what_the_directory_remembers_is_answered_without_the_database() -> None:
    """`remembered` answers from memory or says the database must be asked; it never blocks."""
    nowhere = "postgresql://nobody@127.0.0.1:1/nowhere"  # never connected to by `remembered`
    directory = ThreadDirectory(nowhere, unknown_ttl_s=60)
    assert directory.remembered(None, "1.000001") == thread_key(None, "1.000001")  # no channel: its own
    assert ThreadDirectory(None).remembered("C1", "1.000001") == thread_key("C1", "1.000001")  # no database
    with pytest.raises(LookupNeeded):
        directory.remembered("C1", "1.000001")
    assert directory.resolve("C1", "1.000001") == thread_key("C1", "1.000001")  # refused: its own key ...
    assert directory.remembered("C1", "1.000001") == thread_key("C1", "1.000001")  # ... remembered a while
    with pytest.raises(LookupNeeded):
        directory.remembered("C1", "1.000002")  # another thread still has to be asked


def test_replies_under_an_alerts_root_join_its_incident(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    pg_dsn: str,
    pg_schema: str,
    pg_conn: psycopg.Connection,
) -> None:
    """The first reply asks the read model (in the thread pool), the next one is answered from memory:
    both go to the incident the alert opened, not to a thread of their own."""
    incident, root_ts = "1773459000.000100", slack_ts(3000)
    pg_conn.execute(
        "INSERT INTO slack_posts (post_id, phase, thread_ts, channel, slack_ts, root, recorded_at)"
        " VALUES (%s, 'posted', %s, 'C123ABC456', %s, true, now())",
        (f"{incident}:-:alert:0", incident, root_ts),
    )
    pg_conn.commit()
    server = start_server(
        config(kafka_bootstrap, topic_names, directory_dsn=pg_dsn, directory_schema=pg_schema)
    )
    try:
        assert [_reply(server, root_ts, n).status_code for n in (1, 2)] == [200, 200]
    finally:
        server.stop()
    events = read_events(kafka_bootstrap, topic_names["events"], 2)
    assert [e.thread_ts for e in events] == [incident, incident]
