"""Every statement the review page runs: reads of the projection only (it runs as the read-only role).

Kept beside the page rather than in schemas/read_model.py because only this page reads these shapes;
the tables' meaning is the one documented there and in the migrations.
"""

from __future__ import annotations

# One incident per row: its alert, its Slack root, its rounds and context tokens, its last verdict.
# The filters are optional (NULL matches everything); `q` searches the key, service, alert name and
# every human message of the thread.
INCIDENTS = """
SELECT s.thread_ts, s.service, s.status, s.rounds, s.opened_at,
       a.content ->> 'alertname' AS alertname,
       p.channel, p.slack_ts,
       (SELECT count(*) FROM agent_messages m WHERE m.thread_ts = s.thread_ts) AS rows,
       (SELECT coalesce(sum(m.tokens), 0) FROM agent_messages m WHERE m.thread_ts = s.thread_ts) AS ctx,
       (SELECT j.content -> 'grounded' FROM agent_messages j
         WHERE j.thread_ts = s.thread_ts AND j.role = 'judge' ORDER BY j.seq DESC LIMIT 1) AS verdict
FROM incident_state s
-- the opening alert's row only (`T:-:alert:0`): recall's row and a resolved alert's are alert rows too
LEFT JOIN agent_messages a ON a.thread_ts = s.thread_ts AND a.id = s.thread_ts || ':-:alert:0'
LEFT JOIN LATERAL (
    SELECT channel, slack_ts FROM slack_posts
    WHERE thread_ts = s.thread_ts AND root AND phase <> 'intent' LIMIT 1
) p ON true
WHERE (%(service)s::text IS NULL OR s.service = %(service)s)
  AND (%(state)s::text IS NULL OR s.status = %(state)s)
  AND (%(alert)s::text IS NULL OR a.content ->> 'alertname' = %(alert)s)
  AND (%(channel)s::text IS NULL OR p.channel = %(channel)s)
  AND (%(day)s::date IS NULL OR s.opened_at::date = %(day)s)
  AND (%(channels)s::text[] IS NULL OR p.channel = ANY(%(channels)s))
  AND (%(q)s::text IS NULL
       OR s.thread_ts ILIKE '%%' || %(q)s || '%%'
       OR s.service ILIKE '%%' || %(q)s || '%%'
       OR a.content ->> 'alertname' ILIKE '%%' || %(q)s || '%%'
       OR EXISTS (SELECT 1 FROM agent_messages h WHERE h.thread_ts = s.thread_ts AND h.role = 'human'
                  AND h.content ->> 'text' ILIKE '%%' || %(q)s || '%%'))
ORDER BY s.opened_at DESC, s.thread_ts
LIMIT %(limit)s
"""

# The values the filters offer.
FILTER_VALUES = """
SELECT 'service', service FROM incident_state
UNION SELECT 'state', status FROM incident_state
UNION SELECT 'alert', content ->> 'alertname' FROM agent_messages WHERE role = 'alert' AND content ? 'alertname'
UNION SELECT 'channel', channel FROM slack_posts WHERE root
"""

INCIDENT = """
SELECT s.thread_ts, s.service, s.status, s.rounds, s.opened_at, s.window_start, s.window_end,
       p.channel, p.slack_ts
FROM incident_state s
LEFT JOIN LATERAL (
    SELECT channel, slack_ts FROM slack_posts
    WHERE thread_ts = s.thread_ts AND root AND phase <> 'intent' LIMIT 1
) p ON true
WHERE s.thread_ts = %s
"""

# The thread's rows in visibility order, with the tool's name and the digest the row was written
# with (tool_digest_cache keeps the first compact; a re-rendering replaces agent_messages.compact).
THREAD_ROWS = """
SELECT m.seq, m.round, m.role, m.id, m.tool_call_id, m.content, m.compact, m.tokens, m.created_at,
       c.tool, c.compact AS first_compact, c.tokens AS first_tokens
FROM agent_messages m
LEFT JOIN tool_digest_cache c ON c.message_id = m.id AND c.thread_ts = m.thread_ts
WHERE m.thread_ts = %s
ORDER BY m.seq
"""

ONE_ROW = """
SELECT m.seq, m.round, m.role, m.id, m.tool_call_id, m.content, m.compact, m.tokens, m.created_at,
       c.tool, c.compact AS first_compact, c.tokens AS first_tokens
FROM agent_messages m
LEFT JOIN tool_digest_cache c ON c.message_id = m.id AND c.thread_ts = m.thread_ts
WHERE m.thread_ts = %s AND m.id = %s
"""

POSTS = """
SELECT post_id, phase, channel, slack_ts, root, recorded_at
FROM slack_posts WHERE thread_ts = %s ORDER BY recorded_at, post_id, phase
"""

# A Loki raw, paged in Postgres: the whole raw never leaves the database. Lines are numbered in the
# raw's own order (stream by stream, value by value). First the streams' labels and line counts, then
# one jsonpath slice per stream a page covers: each reads the stored value once, where a set-returning
# expansion would unpack and sort all 50,000 entries to return 200.
_STREAMS = """
FROM agent_messages m,
     jsonb_array_elements(CASE WHEN jsonb_typeof(m.content -> 'data' -> 'result') = 'array'
                               THEN m.content -> 'data' -> 'result' ELSE '[]'::jsonb END)
         WITH ORDINALITY s(stream, i)
WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s
"""
_VALUES = (
    "CASE WHEN jsonb_typeof(s.stream -> 'values') = 'array' THEN s.stream -> 'values' ELSE '[]'::jsonb END"
)

LOKI_SHAPE = f"""
SELECT (s.i - 1)::int, jsonb_array_length({_VALUES}), s.stream -> 'stream'
{_STREAMS}
ORDER BY s.i
"""

LOKI_SLICE = """
SELECT jsonb_path_query_array(m.content, 'lax $.data.result[$k].values[$a to $b]',
                              jsonb_build_object('k', %(k)s::int, 'a', %(a)s::int, 'b', %(b)s::int))
FROM agent_messages m
WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s
"""

# Every line of a Loki raw, stream by stream (tracing a pattern to its lines reads them all, once).
LOKI_ALL = f"""
SELECT (s.i - 1)::int, {_VALUES}
{_STREAMS}
ORDER BY s.i
"""

# Any other raw: its pretty-printed JSON, paged by line in Postgres.
JSON_PAGE = """
SELECT l.n - 1, l.line
FROM agent_messages m,
     regexp_split_to_table(jsonb_pretty(m.content), E'\\n') WITH ORDINALITY l(line, n)
WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s
ORDER BY l.n
LIMIT %(limit)s OFFSET %(offset)s
"""

JSON_TOTAL = """
SELECT count(*) FROM agent_messages m,
     regexp_split_to_table(jsonb_pretty(m.content), E'\\n') l(line)
WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s
"""

# Tables the page must not be able to write: checked at start, it refuses to run otherwise.
WRITABLE_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v')
  AND (has_table_privilege(c.oid, 'INSERT') OR has_table_privilege(c.oid, 'UPDATE')
       OR has_table_privilege(c.oid, 'DELETE') OR has_table_privilege(c.oid, 'TRUNCATE'))
ORDER BY 1
"""

# A re-derivation's diff: the visible rows of a schema, as `rederive` compares them (schema-qualified:
# the page reads the projection it serves and the one it is compared with).
DIFF_ROWS = "SELECT id, thread_ts, role, compact, tokens FROM {}.agent_messages"
SCHEMA_EXISTS = "SELECT to_regclass(format('%%I.agent_messages', %s::text)) IS NOT NULL"

# A Kubernetes EventList raw's events, one row each, in the raw's order (a pod-events group is traced to
# the events it sums).
POD_EVENTS = """
SELECT (e.i - 1)::int, e.item ->> 'type', e.item ->> 'reason', e.item ->> 'count', e.item ->> 'message',
       e.item ->> 'firstTimestamp', e.item ->> 'lastTimestamp', e.item -> 'involvedObject' ->> 'name'
FROM agent_messages m,
     jsonb_array_elements(CASE WHEN jsonb_typeof(m.content -> 'items') = 'array'
                               THEN m.content -> 'items' ELSE '[]'::jsonb END) WITH ORDINALITY e(item, i)
WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s
ORDER BY e.i
"""

# Raw token counts: the rows of some threads, then the raws not yet counted.
THREAD_IDS = "SELECT id, thread_ts FROM agent_messages WHERE thread_ts = ANY(%s)"
CONTENTS = "SELECT id, content FROM agent_messages WHERE id = ANY(%s)"

# A Prometheus raw's series (data.result of a query_range matrix), for tracing a series line.
PROM_RESULT = """
SELECT CASE WHEN jsonb_typeof(m.content -> 'data' -> 'result') = 'array' THEN m.content -> 'data' -> 'result' END
FROM agent_messages m
WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s
"""

# One row's raw, whole (a Tempo trace: small beside a log answer), for tracing a span group.
RAW_OF_ROW = "SELECT m.content FROM agent_messages m WHERE m.thread_ts = %(thread_ts)s AND m.id = %(id)s"

# Each row's re-renderings in the order applied (migration 011), for one thread.
HISTORY = """
SELECT target_id, made_round, policy, compact, tokens FROM rendering_history
WHERE thread_ts = %s ORDER BY seq
"""

# The recall rows of the listed incidents (`T:-:recall:0`): what each recall recorded at its alert's open.
RECALL_ROWS = """
SELECT thread_ts, coalesce(compact, content) FROM agent_messages
WHERE id = ANY(%s::text[]) AND role = 'alert'
"""

# Where each incident may be seen, as its profile says now (schemas/recall.py `may_see` decides).
PROFILE_CHANNELS = (
    "SELECT thread_ts, channel, private FROM incident_profiles WHERE thread_ts = ANY(%s::text[])"
)
