"""The projection's SQL: every statement either plan sends, and the shape of its parameters.

Statements use unqualified table names: the connection's search_path is the projection's
schema (see `store.connect`); the COPY plan's batch table lives in pg_temp. Nothing here
decides anything: which statement runs, and whether a round may be published, is the plans'
and `rounds`' business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from services.projector import row_format
from services.projector.mapping import CacheDigest, RecordPost, UpsertState

# The row columns, their order and their types are `row_format`'s; the statements only name them.
_ROW_ARRAYS = row_format.unnest_rows("r")
_ROW_COLUMNS = row_format.COLUMN_LIST
_STAGED_COLUMNS = row_format.qualified("s")

INSERT_VISIBLE = (
    f"INSERT INTO agent_messages ({_ROW_COLUMNS}) SELECT {_ROW_COLUMNS} FROM {_ROW_ARRAYS}"
    " ORDER BY r.ord ON CONFLICT (id) DO NOTHING"
)

# A row already published (a duplicate delivered after its round committed) is not staged again.
INSERT_STAGED = (
    f"INSERT INTO round_staging ({_ROW_COLUMNS}) SELECT {_ROW_COLUMNS} FROM {_ROW_ARRAYS}"
    " WHERE NOT EXISTS (SELECT 1 FROM agent_messages m WHERE m.id = r.id)"
    " ORDER BY r.ord ON CONFLICT (id) DO NOTHING"
)

# A post's and a digest's columns are their dataclass's fields, in order: `columns` sends them in that order.
_POST_COLUMNS = ", ".join(f.name for f in fields(RecordPost))
_DIGEST_COLUMNS = ", ".join(f.name for f in fields(CacheDigest))

INSERT_POSTS = (
    f"INSERT INTO slack_posts ({_POST_COLUMNS})"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::boolean[],"
    " %s::timestamptz[]) ON CONFLICT (post_id, phase) DO NOTHING"
)


INSERT_DIGESTS = (
    f"INSERT INTO tool_digest_cache ({_DIGEST_COLUMNS}) SELECT {_DIGEST_COLUMNS}"
    " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::jsonb[], %s::int[],"
    f" %s::timestamptz[]) WITH ORDINALITY AS d({_DIGEST_COLUMNS}, ord)"
    " ORDER BY d.ord ON CONFLICT (thread_ts, tool, args_hash) DO NOTHING"
)

# The newest fact by event time wins, so a duplicate of an old event delivered late changes nothing.
UPSERT_STATE = """
INSERT INTO incident_state AS s (thread_ts, service, status, window_start, window_end, rounds, opened_at, updated_at)
VALUES (%(thread_ts)s, %(service)s, %(status)s, %(window_start)s, %(window_end)s, 0, %(opened_at)s, %(updated_at)s)
ON CONFLICT (thread_ts) DO UPDATE SET
    service = EXCLUDED.service,
    status = EXCLUDED.status,
    window_start = EXCLUDED.window_start,
    window_end = EXCLUDED.window_end,
    opened_at = CASE WHEN %(keep_opened_at)s THEN s.opened_at ELSE EXCLUDED.opened_at END,
    updated_at = EXCLUDED.updated_at
WHERE s.updated_at <= EXCLUDED.updated_at
"""

RE_RENDER = """
WITH visible AS (
    UPDATE agent_messages SET compact = %(compact)s::jsonb, tokens = %(tokens)s
    WHERE id = %(id)s RETURNING thread_ts
), staged AS (
    UPDATE round_staging SET compact = %(compact)s::jsonb, tokens = %(tokens)s
    WHERE id = %(id)s RETURNING thread_ts
), history AS (
    INSERT INTO rendering_history (event_id, thread_ts, target_id, made_round, policy, compact, tokens)
    SELECT %(event_id)s, t.thread_ts, %(id)s, %(made_round)s, %(policy)s, %(compact)s::jsonb, %(tokens)s
    FROM (SELECT thread_ts FROM visible UNION SELECT thread_ts FROM staged) t
    WHERE %(event_id)s <> ''
    ON CONFLICT (event_id) DO NOTHING
)
SELECT (SELECT count(*) FROM visible) + (SELECT count(*) FROM staged)
"""

LOCK_OFFSETS = (
    "SELECT partition, next_offset FROM projector_offsets"
    " WHERE consumer_group = %s AND topic = %s AND partition = ANY(%s::int[]) FOR UPDATE"
)

SAVE_OFFSETS = """
INSERT INTO projector_offsets (consumer_group, topic, partition, next_offset)
SELECT %s, %s, p, n FROM unnest(%s::int[], %s::bigint[]) AS t(p, n)
ON CONFLICT (consumer_group, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset
"""

NOTIFY = """
SELECT pg_notify(%s, json_build_object(
    'schema', %s::text, 'thread_ts', t,
    'max_seq', (SELECT max(seq) FROM agent_messages m WHERE m.thread_ts = t))::text)
FROM unnest(%s::text[]) AS t
"""

# Publish a round the round check accepted: move its staged rows in the marker's order, clear
# them from staging, bump incident_state.rounds. Data-modifying CTEs share one snapshot.
PUBLISH_ROUND = f"""
WITH listed AS (
    SELECT l.id, l.ord FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS l(id, ord)
), moved AS (
    INSERT INTO agent_messages ({_ROW_COLUMNS})
    SELECT {_STAGED_COLUMNS}
    FROM listed l JOIN round_staging s ON s.id = l.id ORDER BY l.ord
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
), cleared AS (
    DELETE FROM round_staging r USING listed l WHERE r.id = l.id RETURNING 1
)
UPDATE incident_state SET rounds = greatest(rounds, %(round)s) WHERE thread_ts = %(thread_ts)s
"""

# --- the COPY plan's batch table -----------------------------------------------------------
#
# Every row of the batch is COPYed (text format, built in one string) into a temporary table,
# each marked with where it goes (plan_copy.Dest's table codes): 'v' into agent_messages at
# position (k1, k2), 's' into round_staging, 'x' nowhere (a copy of a row already staged, which the
# marker moves instead, or already in agent_messages). The row's columns sit between the routing
# columns and its digest's key, in row_format's order (row_format.copy_text renders them).

BATCH_COLUMNS = f"ord, dest, k1, k2, {_ROW_COLUMNS}, tool, args_hash"

CREATE_BATCH_TABLE = """
CREATE TEMP TABLE IF NOT EXISTS projector_batch (
    ord integer NOT NULL, dest "char" NOT NULL, k1 bigint NOT NULL, k2 integer NOT NULL,
    id text NOT NULL, thread_ts text NOT NULL, round integer, role text NOT NULL, tool_call_id text,
    content jsonb NOT NULL, compact jsonb, tokens integer NOT NULL, created_at timestamptz NOT NULL,
    tool text, args_hash text
) ON COMMIT DELETE ROWS
"""

# Emptied at the start too: savepoints of one transaction (the one-by-one fallback) share it.
CLEAR_BATCH_TABLE = "DELETE FROM pg_temp.projector_batch"

COPY_BATCH = f"COPY pg_temp.projector_batch ({BATCH_COLUMNS}) FROM STDIN"

# The rows a batch publishes, straight into the table, when they are all in the batch (plan_copy).
COPY_VISIBLE = f"COPY agent_messages ({_ROW_COLUMNS}) FROM STDIN"

PUBLISH_BATCH = f"""
WITH pub AS (
    SELECT e->>0 AS id, (e->>1)::bigint AS k1, (e->>2)::int AS k2 FROM jsonb_array_elements(%s::jsonb) AS e
), moved AS (
    INSERT INTO agent_messages ({_ROW_COLUMNS})
    SELECT {_ROW_COLUMNS} FROM (
        SELECT {_ROW_COLUMNS}, k1, k2 FROM pg_temp.projector_batch WHERE dest = 'v'
        UNION ALL
        SELECT {_STAGED_COLUMNS}, p.k1, p.k2
        FROM pub p JOIN round_staging s ON s.id = p.id
    ) u ORDER BY k1, k2
    ON CONFLICT (id) DO NOTHING
    RETURNING thread_ts, seq
), cleared AS (
    DELETE FROM round_staging r USING pub p WHERE r.id = p.id RETURNING 1
), bumped AS (
    UPDATE incident_state i SET rounds = greatest(i.rounds, (b.value)::int)
    FROM jsonb_each_text(%s::jsonb) AS b
    WHERE i.thread_ts = b.key
    RETURNING 1
), top AS (
    SELECT thread_ts, max(seq) AS max_seq FROM moved GROUP BY thread_ts
)
-- NOTIFY as NOTIFY does, but a thread this statement wrote to takes its max seq from RETURNING
-- (the snapshot of the subquery predates these rows) instead of one more index probe.
SELECT count(pg_notify(%s, json_build_object(
    'schema', %s::text, 'thread_ts', t.t,
    'max_seq', coalesce(top.max_seq, (SELECT max(seq) FROM agent_messages m WHERE m.thread_ts = t.t)))::text))
FROM jsonb_array_elements_text(%s::jsonb) AS t(t) LEFT JOIN top ON top.thread_ts = t.t
"""

# Where every id the batch's markers list stands now: staged (with the ai rows' tool call ids) or visible.
LOOKUP_BATCH = """
WITH listed AS (SELECT ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)) AS ids)
SELECT s.id, true, s.role, s.tool_call_id,
       CASE WHEN jsonb_typeof(s.content -> 'tool_calls') = 'array'
            THEN ARRAY(SELECT c ->> 'id' FROM jsonb_array_elements(s.content -> 'tool_calls') AS c) END
FROM round_staging s, listed l WHERE s.id = ANY(l.ids)
UNION ALL
SELECT m.id, false, m.role, m.tool_call_id, NULL FROM agent_messages m, listed l WHERE m.id = ANY(l.ids)
"""

# A row already published (a duplicate delivered after its round committed) is not staged again.
STAGE_BATCH = f"""
INSERT INTO round_staging ({_ROW_COLUMNS})
SELECT {_ROW_COLUMNS} FROM pg_temp.projector_batch b
WHERE b.dest = 's' AND NOT EXISTS (SELECT 1 FROM agent_messages m WHERE m.id = b.id)
ORDER BY b.ord ON CONFLICT (id) DO NOTHING
"""

DIGESTS_FROM_BATCH = """
INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens, created_at)
SELECT thread_ts, tool, args_hash, id, tool_call_id, compact, tokens, created_at
FROM pg_temp.projector_batch WHERE args_hash IS NOT NULL
ORDER BY ord ON CONFLICT (thread_ts, tool, args_hash) DO NOTHING
"""

# Many upserts in one statement; a statement may not touch one key twice, so the batch's states
# go in waves (the n-th state of every thread in wave n), which keeps each thread's order, and
# a wave goes in two statements, by whether an alert re-firing keeps the opening time.
_UPSERT_STATES = """
INSERT INTO incident_state AS s (thread_ts, service, status, window_start, window_end, rounds, opened_at, updated_at)
SELECT e->>0, e->>1, e->>2, (e->>3)::timestamptz, (e->>4)::timestamptz, 0, (e->>5)::timestamptz,
       (e->>6)::timestamptz
FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS u(e, ord)
ORDER BY ord
ON CONFLICT (thread_ts) DO UPDATE SET
    service = EXCLUDED.service,
    status = EXCLUDED.status,
    window_start = EXCLUDED.window_start,
    window_end = EXCLUDED.window_end,
    opened_at = {opened_at},
    updated_at = EXCLUDED.updated_at
WHERE s.updated_at <= EXCLUDED.updated_at
"""
UPSERT_STATES_KEEP_OPENED = _UPSERT_STATES.format(opened_at="s.opened_at")
UPSERT_STATES_MOVE_OPENED = _UPSERT_STATES.format(opened_at="EXCLUDED.opened_at")


# --- parameters ------------------------------------------------------------------------------


def columns(
    cls: type[RecordPost | CacheDigest], items: Sequence[RecordPost | CacheDigest]
) -> list[list[Any]]:
    """One array per field of `cls`, in field order: the parameters of `INSERT_POSTS` or `INSERT_DIGESTS`."""
    return [[getattr(item, f.name) for item in items] for f in fields(cls)]


def state_params(op: UpsertState) -> dict[str, Any]:
    """`UPSERT_STATE`'s named parameters: every field of the op."""
    return {f.name: getattr(op, f.name) for f in fields(op)}
