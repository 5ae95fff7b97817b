"""Recall's inverted index changes by diffs (schemas/recall_keys.py): only what changed, all when the incident moved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.recall_keys import Posting, posting, posting_changes

T = datetime(2026, 3, 14, tzinfo=UTC)


def p(
    keys: set[str], *, channel: str | None = "C1", private: bool = False, at: datetime | None = T
) -> Posting:
    return Posting(channel, private, at, frozenset(keys))


def test_keys_name_patterns_reasons_and_the_alert_on_its_service() -> None:
    got = posting(
        ["oom <n>"], ["BackOff"], "KubePodOOMKilled", "checkout", channel="C1", private=False, opened_at=T
    )
    assert got.keys == {"oom <n>", "reason:BackOff", "label:KubePodOOMKilled/checkout"}
    assert posting([], [], None, "checkout", channel="C1", private=False, opened_at=T).keys == frozenset()


def test_a_new_incident_inserts_every_key_and_a_changed_one_only_the_difference() -> None:
    deletes, inserts = posting_changes({}, {"t": p({"a", "b"})})
    assert deletes == [] and inserts == [("t", "a", "C1", False, T), ("t", "b", "C1", False, T)]
    deletes, inserts = posting_changes({"t": p({"a", "b"})}, {"t": p({"b", "c"})})
    assert deletes == [("t", "a")] and inserts == [("t", "c", "C1", False, T)]
    assert posting_changes({"t": p({"a"})}, {"t": p({"a"})}) == ([], [])


def test_when_where_or_how_private_changes_every_row_is_rewritten() -> None:
    for moved in (
        p({"a", "b"}, private=True),
        p({"a", "b"}, channel="C2"),
        p({"a", "b"}, at=T + timedelta(1)),
    ):
        deletes, inserts = posting_changes({"t": p({"a", "b"})}, {"t": moved})
        assert deletes == [("t", "a"), ("t", "b")]
        assert inserts == [("t", k, moved.channel, moved.private, moved.opened_at) for k in ("a", "b")]


def test_an_incident_with_no_channel_or_time_has_no_rows_and_loses_them() -> None:
    assert posting_changes({}, {"t": p({"a"}, channel=None)}) == ([], [])
    assert posting_changes({}, {"t": p({"a"}, at=None)}) == ([], [])
    assert posting_changes({"t": p({"a"})}, {"t": p({"a"}, channel=None)}) == ([("t", "a")], [])
