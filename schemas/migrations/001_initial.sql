-- The projection of the event topics. Every table here can be dropped and
-- re-derived by replaying the topics (invariant 8).

-- What the agent reads, with ONE query: coalesce(compact, content) ORDER BY seq.
CREATE TABLE IF NOT EXISTS agent_messages (
    id            text PRIMARY KEY,                      -- thread_ts:round:node:i (invariant 1)
    thread_ts     text        NOT NULL,
    seq           bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,  -- visibility order
    round         integer,                               -- NULL: outside any round (alert, human turns)
    role          text        NOT NULL CHECK (role IN ('alert', 'human', 'ai', 'tool', 'judge', 'post')),
    tool_call_id  text,
    content       jsonb       NOT NULL,                  -- the raw, verbatim; never sent to the model
    compact       jsonb,                                 -- what the model sees; NULL means content
    tokens        integer     NOT NULL CHECK (tokens >= 0),  -- tokens of coalesce(compact, content)
    created_at    timestamptz NOT NULL                   -- the event time, never the insert time
);
CREATE INDEX IF NOT EXISTS agent_messages_thread_seq ON agent_messages (thread_ts, seq);

-- One row per incident thread.
CREATE TABLE IF NOT EXISTS incident_state (
    thread_ts     text PRIMARY KEY,
    service       text        NOT NULL,
    status        text        NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    rounds        integer     NOT NULL DEFAULT 0,
    opened_at     timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- Rows of a round wait here until the round's marker arrives (invariant 3).
CREATE TABLE IF NOT EXISTS round_staging (
    id            text PRIMARY KEY,
    thread_ts     text        NOT NULL,
    round         integer     NOT NULL,
    role          text        NOT NULL,
    tool_call_id  text,
    content       jsonb       NOT NULL,
    compact       jsonb,
    tokens        integer     NOT NULL,
    created_at    timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS round_staging_thread_round ON round_staging (thread_ts, round);

-- A retried round reads a digest back here instead of calling the tool again.
CREATE TABLE IF NOT EXISTS tool_digest_cache (
    thread_ts     text NOT NULL,
    tool          text NOT NULL,
    args_hash     text NOT NULL,
    message_id    text NOT NULL,
    tool_call_id  text NOT NULL,
    compact       jsonb NOT NULL,
    tokens        integer NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (thread_ts, tool, args_hash)
);

-- The projector's Kafka positions, written in the same transaction as the rows (invariant 2).
CREATE TABLE IF NOT EXISTS projector_offsets (
    consumer_group text    NOT NULL,
    topic          text    NOT NULL,
    partition      integer NOT NULL,
    next_offset    bigint  NOT NULL,
    PRIMARY KEY (consumer_group, topic, partition)
);
