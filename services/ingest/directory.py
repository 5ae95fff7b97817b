"""Which incident a Slack thread belongs to: the directory of threads that alerts opened.

An alert's incident has its own key (derived from the alert group, see `alerts.py`); the Slack
poster opens a thread for it by posting the alert, and records that message as the thread's
root (`slack_posts`, projected from SlackPostRecorded). A reply or a mention in that Slack
thread must join the incident, so ingest looks its (channel, thread ts) up here. Any other
thread is its own: its key is its channel and its ts.

Read-only, bounded and never in the way: a known root is remembered for good (it never changes),
an unknown one for a few seconds, and a database that does not answer within its statement
timeout makes the message its own thread's, with a warning, never a failed request.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from psycopg import sql

from schemas.ids import thread_key
from services.runtime.logs import about

log = logging.getLogger("ingest.directory")
LOOKUP = "SELECT thread_ts FROM slack_posts WHERE channel = %s AND slack_ts = %s AND root AND phase <> 'intent' LIMIT 1"


class ThreadDirectory:
    def __init__(
        self, dsn: str | None, schema: str = "public", unknown_ttl_s: float = 2.0, max_entries: int = 100_000
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.unknown_ttl_s = unknown_ttl_s
        self.max_entries = max_entries
        self._known: dict[tuple[str, str], str] = {}
        self._unknown: dict[tuple[str, str], float] = {}
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._warned_at = 0.0

    def resolve(self, channel: str | None, ts: str) -> str:
        """The key of the thread (channel, ts): an incident's own key when an alert opened it."""
        if channel is None or self.dsn is None:
            return thread_key(channel, ts)
        where = (channel, ts)
        if where in self._known:
            return self._known[where]
        if time.monotonic() < self._unknown.get(where, 0.0):
            return thread_key(channel, ts)
        incident = self._lookup(channel, ts)
        if incident is not None:
            if len(self._known) >= self.max_entries:
                self._known.clear()
            self._known[where] = incident
            return incident
        if len(self._unknown) >= self.max_entries:
            self._unknown.clear()
        self._unknown[where] = time.monotonic() + self.unknown_ttl_s
        return thread_key(channel, ts)

    def _lookup(self, channel: str, ts: str) -> str | None:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.dsn or "", autocommit=True, connect_timeout=2)
                    self._conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                    self._conn.execute("SET statement_timeout = 200")
                row = self._conn.execute(LOOKUP, (channel, ts)).fetchone()
            except psycopg.Error as exc:
                self._conn = None
                if time.monotonic() - self._warned_at > 60:
                    self._warned_at = time.monotonic()
                    log.warning(
                        "thread directory unavailable: replies are keyed by their Slack thread",
                        extra=about(
                            None, None, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                        ),
                    )
                return None
        return None if row is None else str(row[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
