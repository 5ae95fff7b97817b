-- Every rendering a row was given after it was written (a ReRendered event, an edit or a delete), in
-- the order the projector applied them. agent_messages.compact holds the current one only; this keeps
-- the ones between, so the review page shows each rendering a row had and rebuilds what an earlier
-- round's model calls were sent. Keyed by the event's id: a redelivery or a replay adds nothing
-- (invariant 2). made_round is the round whose context needed the rendering (NULL for edits/deletes).
CREATE TABLE IF NOT EXISTS rendering_history (
    event_id    text PRIMARY KEY,
    thread_ts   text NOT NULL,
    target_id   text NOT NULL,
    made_round  integer,
    policy      text,
    compact     jsonb NOT NULL,
    tokens      integer NOT NULL,
    seq         bigserial
);
CREATE INDEX IF NOT EXISTS rendering_history_thread ON rendering_history (thread_ts, seq);

DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_reader') THEN
        EXECUTE format('GRANT SELECT ON rendering_history TO incident_memory_reader');
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_projector') THEN
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON rendering_history TO incident_memory_projector');
        EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE rendering_history_seq_seq TO incident_memory_projector');
    END IF;
END
$$;
