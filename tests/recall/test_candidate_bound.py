"""The candidate query reads at most `SIGNATURE_ROWS` rows of recall's index, however common the query's keys
(issue 37: recall's work is small by design, not by a quiet machine). Real Postgres: the rows are counted by
Postgres's own statistics of the index, around the very statement recall runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from schemas import recall as recall_mod
from schemas.recall_budget import KEY_FLOOR, PER_KEY, SIGNATURE_ROWS
from schemas.recall_scoring import Candidate, Rarity

pytestmark = pytest.mark.stack

PICKING = recall_mod.PICKING_KEYS  # as many patterns, and as many pod reasons, as ever pick candidates
KEYS = [f"pattern {k}" for k in range(PICKING)] + [f"reason:R{k}" for k in range(PICKING)]
HOLDERS = 400  # every key held by this many incidents: more than one key may read


@pytest.fixture
def common_keys(pg_conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """Every key of KEYS held by the same HOLDERS incidents of one channel (profiles, index rows, counts)."""
    pg_conn.execute(
        """
        INSERT INTO incident_recall_keys (thread_ts, key, channel, private, opened_at)
        SELECT 't' || i, k, 'C0SHOP', false, timestamptz '2026-01-01' + i * interval '1 hour'
        FROM generate_series(1, %(holders)s) i, unnest(%(keys)s::text[]) k
        """,
        {"holders": HOLDERS, "keys": KEYS},
    )
    pg_conn.execute("INSERT INTO incident_signature_counts SELECT unnest(%s::text[]), %s", (KEYS, HOLDERS))
    pg_conn.execute("INSERT INTO incident_signature_counts VALUES ('#incidents', %s)", (HOLDERS + 1,))
    pg_conn.execute(
        """
        INSERT INTO incident_profiles (thread_ts, channel, private, opened_at, patterns, signatures,
            error_patterns, reasons, reason_keys, shapes, claims, decisions, discussion, discussion_tsv,
            profile_sha256)
        SELECT 't' || i, 'C0SHOP', false, timestamptz '2026-01-01' + i * interval '1 hour', '{}', '{}', '{}',
            '{}', '{}', '{}', '{}', '{}', '', ''::tsvector, ''
        FROM generate_series(1, %s) i
        """,
        (HOLDERS,),
    )
    pg_conn.commit()
    yield pg_conn


def query() -> Candidate:
    return Candidate(
        thread_ts="new", labels={}, channel="C0SHOP", private=False, opened_at=1_800_000_000.0,
        resolved_at=None, patterns={k: 1 for k in KEYS[:PICKING]}, error_patterns=frozenset(),
        reasons={k.removeprefix("reason:"): 1 for k in KEYS[PICKING:]}, shapes=frozenset(), lexemes=frozenset(),
    )  # fmt: skip


INDEX_READ = "SELECT pg_stat_get_xact_tuples_returned('incident_recall_keys_search'::regclass)"


def index_rows_read(conn: psycopg.Connection, statement: str, params: dict[str, Any]) -> int:
    """Entries of recall's index the statement read (this transaction's own counter, exact)."""
    before = conn.execute(INDEX_READ).fetchone()
    conn.execute(statement, params).fetchall()
    after = conn.execute(INDEX_READ).fetchone()
    assert before is not None and after is not None
    return int(after[0]) - int(before[0])


def test_the_signature_stage_reads_within_its_budget_however_common_the_keys(
    common_keys: psycopg.Connection,
) -> None:
    q = query()
    rarity = Rarity(HOLDERS + 1, dict.fromkeys(KEYS, HOLDERS))
    params = recall_mod.candidate_params(q, rarity, ["C0SHOP"])
    read = index_rows_read(common_keys, recall_mod._CANDIDATES, params)
    assert read <= SIGNATURE_ROWS < len(KEYS) * PER_KEY  # unbounded, each key would read its PER_KEY newest
    assert read >= PER_KEY  # and the stage does read: the most telling key in full


def test_recall_still_finds_the_incidents_holding_the_most_keys(common_keys: psycopg.Connection) -> None:
    found = {c.thread_ts for c in _candidates(common_keys)}
    read_by_every_key = {f"t{i}" for i in range(HOLDERS - KEY_FLOOR + 1, HOLDERS + 1)}
    assert len(found) == recall_mod.CANDIDATES and read_by_every_key <= found


def _candidates(conn: psycopg.Connection) -> list[Candidate]:
    q = query()
    params = recall_mod.candidate_params(q, Rarity(HOLDERS + 1, dict.fromkeys(KEYS, HOLDERS)), ["C0SHOP"])
    return [recall_mod.short_candidate_of(r) for r in conn.execute(recall_mod._CANDIDATES, params).fetchall()]
