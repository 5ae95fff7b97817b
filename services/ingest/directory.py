"""Which incident a Slack thread, or an Alertmanager group, belongs to: ingest's reads of the read model.

An alert's incident has its own key (derived from the alert group, see `alerts.py`); the Slack
poster opens a thread for it by posting the alert, and records that message as the thread's
root (`slack_posts`, projected from SlackPostRecorded). A reply or a mention in that Slack
thread must join the incident, so ingest looks its (channel, thread ts) up here. Any other
thread is its own: its key is its channel and its ts.

An alert group keeps its thread while its incident is open (`alerts.incident_for`): `GroupDirectory`
asks for the newest incident whose alert carried the group's key.

Read-only, bounded and never in the way: a known root is remembered for good (it never changes),
an unknown one for a few seconds, and a database that does not answer within its statement
timeout makes the message its own thread's, with a warning, never a failed request.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import datetime

import psycopg
from psycopg import sql

from schemas import read_model
from schemas.ids import thread_key
from services.ingest.alerts import AlertGroup, KnownIncident
from services.runtime.logs import about

log = logging.getLogger("ingest.directory")


class LookupNeeded(Exception):
    """`ThreadDirectory.remembered` cannot tell without asking the database: the caller asks it
    (`resolve`) off its event loop, so a slow or unreachable database never stalls other requests."""


class ReadConnection:
    """One autocommit connection to the read model, opened lazily, with a short statement timeout.
    A query that fails returns None (with a warning at most once a minute): never a failed request."""

    def __init__(self, dsn: str | None, schema: str, what: str) -> None:
        self.dsn, self.schema, self.what = dsn, schema, what
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._warned_at = 0.0

    def one(self, query: str, params: tuple[str, ...]) -> tuple[object, ...] | None:
        if self.dsn is None:
            return None
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=2)
                    self._conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                    self._conn.execute("SET statement_timeout = 200")
                return self._conn.execute(query, params).fetchone()
            except psycopg.Error as exc:
                self._conn = None
                if time.monotonic() - self._warned_at > 60:
                    self._warned_at = time.monotonic()
                    log.warning(
                        f"{self.what} unavailable",
                        extra=about(
                            None, None, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                        ),
                    )
                return None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()


class ThreadDirectory:
    def __init__(
        self, dsn: str | None, schema: str = "public", unknown_ttl_s: float = 2.0, max_entries: int = 100_000
    ) -> None:
        self.dsn = dsn
        self.unknown_ttl_s = unknown_ttl_s
        self.max_entries = max_entries
        self._known: dict[tuple[str, str], str] = {}
        self._unknown: dict[tuple[str, str], float] = {}
        self._read = ReadConnection(dsn, schema, "thread directory: replies are keyed by their Slack thread")

    def remembered(self, channel: str | None, ts: str) -> str:
        """`resolve` from what this process remembers; raises LookupNeeded where only the database
        can tell (the one blocking step: up to its connect or statement timeout)."""
        if channel is None or self.dsn is None:
            return thread_key(channel, ts)
        where = (channel, ts)
        known = self._known.get(where)
        if known is not None:
            return known
        if time.monotonic() < self._unknown.get(where, 0.0):
            return thread_key(channel, ts)
        raise LookupNeeded(where)

    def resolve(self, channel: str | None, ts: str) -> str:
        """The key of the thread (channel, ts): an incident's own key when an alert opened it.
        Blocks on the database when this process does not remember the answer."""
        with contextlib.suppress(LookupNeeded):
            return self.remembered(channel, ts)
        assert channel is not None  # remembered() answers every channel-less thread itself
        where = (channel, ts)
        row = self._read.one(read_model.THREAD_OF_SLACK_POST, (channel, ts))
        if row is not None:
            if len(self._known) >= self.max_entries:
                self._known.clear()
            self._known[where] = incident = str(row[0])
            return incident
        if len(self._unknown) >= self.max_entries:
            self._unknown.clear()
        self._unknown[where] = time.monotonic() + self.unknown_ttl_s
        return thread_key(channel, ts)

    def close(self) -> None:
        self._read.close()


class GroupDirectory:
    """The newest incident of an Alertmanager group: this process's own recent decisions first, then the
    read model. The projection trails the topic by up to a second, and the alerts topic hands a whole
    batch (a group's history, on a replay) to one process: a decision made here is kept for
    `recent_ttl_s` so the group's next notification does not miss it. Without a database, or when it
    does not answer, the mapping is stateless (every thread from the earliest startsAt) with a warning."""

    def __init__(
        self, dsn: str | None, schema: str = "public", recent_ttl_s: float = 30.0, max_entries: int = 100_000
    ) -> None:
        self.recent_ttl_s = recent_ttl_s
        self.max_entries = max_entries
        self._recent: dict[str, tuple[float, KnownIncident]] = {}
        self._lock = threading.Lock()
        self._read = ReadConnection(
            dsn, schema, "alert group directory: a group's thread follows its earliest alert"
        )

    def known(self, group_key: str) -> KnownIncident | None:
        with self._lock:
            recent = self._recent.get(group_key)
        if recent is not None and time.monotonic() < recent[0]:
            return recent[1]
        row = self._read.one(read_model.INCIDENT_OF_ALERT_GROUP, (group_key,))
        if row is None:
            return None
        thread_ts, opened_at, resolved_at = row
        assert isinstance(opened_at, datetime) and (resolved_at is None or isinstance(resolved_at, datetime))
        return KnownIncident(str(thread_ts), opened_at, resolved_at)

    def decided(self, group: AlertGroup) -> None:
        """Remember the incident a notification was mapped to (call once its events are acked)."""
        if group.incident is None or not group.group_key:
            return
        with self._lock:
            if len(self._recent) >= self.max_entries:
                self._recent.clear()
            self._recent[group.group_key] = (time.monotonic() + self.recent_ttl_s, group.incident)

    def close(self) -> None:
        self._read.close()
