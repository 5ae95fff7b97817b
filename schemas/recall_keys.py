"""Recall's inverted index: the keys an incident is found by, and how its rows change (pure).

The projector keeps one `incident_recall_keys` row per (incident, key) beside the profile, in the same
transaction; recall reads the newest incidents holding each of the query's keys from one index range
(migration 009). Both sides name keys through this module, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

REASON_PREFIX = "reason:"
LABEL_PREFIX = "label:"


def reason_key(reason: str) -> str:
    return REASON_PREFIX + reason


def label_key(alertname: str | None, service: str | None) -> str | None:
    """Same alert on the same service: a key of its own (a noisy label, so it picks candidates apart)."""
    return f"{LABEL_PREFIX}{alertname}/{service}" if alertname and service else None


@dataclass(frozen=True)
class Posting:
    """Where an incident is found: what the search filters on, and by which keys."""

    channel: str | None
    private: bool
    opened_at: datetime | None
    keys: frozenset[str]

    def indexed(self) -> bool:
        """An incident with no channel or no opening time is never recalled (visibility fails closed)."""
        return self.channel is not None and self.opened_at is not None


def posting(
    signatures: Iterable[str],
    reasons: Iterable[str],
    alertname: str | None,
    service: str | None,
    *,
    channel: str | None,
    private: bool,
    opened_at: datetime | None,
) -> Posting:
    label = label_key(alertname, service)
    keys = {*signatures, *(reason_key(r) for r in reasons), *([label] if label else [])}
    return Posting(channel, private, opened_at, frozenset(keys))


Row = tuple[str, str, str, bool, datetime]  # thread_ts, key, channel, private, opened_at


def posting_changes(
    old: Mapping[str, Posting], new: Mapping[str, Posting]
) -> tuple[list[tuple[str, str]], list[Row]]:
    """The (thread, key) rows to delete and the rows to insert when the incidents `old` become `new`.

    Only keys that changed are touched, unless where or when the incident is seen changed (then all are).
    """
    deletes: list[tuple[str, str]] = []
    inserts: list[Row] = []
    for thread in sorted(new):
        after, before = new[thread], old.get(thread)
        was = before.keys if before is not None and before.indexed() else frozenset()
        now = after.keys if after.indexed() else frozenset()
        moved = before is not None and (before.channel, before.private, before.opened_at) != (
            after.channel,
            after.private,
            after.opened_at,
        )
        gone, added = (was, now) if moved else (was - now, now - was)
        deletes += [(thread, k) for k in sorted(gone)]
        if after.channel is not None and after.opened_at is not None:
            inserts += [(thread, k, after.channel, after.private, after.opened_at) for k in sorted(added)]
    return deletes, inserts
