-- Recall's inverted index (invariant 14; issue 37's query time at 100,000 incidents): one row per
-- (incident, key) where a key is a log pattern signature, `reason:<Reason>` or `label:<alertname>/<service>`,
-- carrying what the candidate search filters and orders by (channel, privacy, opening time), so the newest
-- incidents holding a key come from one index range read, never from sorting every incident that holds it.
-- A projection of incident_profiles, kept by the projector in the same transaction: a replay rebuilds it.
-- Incidents whose channel or opening time is unknown have no rows: recall never shows them (fails closed).

CREATE TABLE IF NOT EXISTS incident_recall_keys (
    thread_ts  text        NOT NULL,
    key        text        NOT NULL,
    channel    text        NOT NULL,
    private    boolean     NOT NULL,
    opened_at  timestamptz NOT NULL,
    PRIMARY KEY (thread_ts, key)
);
CREATE INDEX IF NOT EXISTS incident_recall_keys_search
    ON incident_recall_keys (key, channel, opened_at DESC) INCLUDE (thread_ts, private);

-- Profiles written before this migration get their keys now.
INSERT INTO incident_recall_keys (thread_ts, key, channel, private, opened_at)
SELECT p.thread_ts, k.key, p.channel, p.private, p.opened_at
FROM incident_profiles p, LATERAL (
    SELECT unnest(p.signatures) AS key
    UNION SELECT 'reason:' || unnest(p.reason_keys)
    UNION SELECT 'label:' || p.alertname || '/' || p.service WHERE p.alertname IS NOT NULL AND p.service IS NOT NULL
) k
WHERE p.channel IS NOT NULL AND p.opened_at IS NOT NULL
ON CONFLICT DO NOTHING;

DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_reader') THEN
        EXECUTE 'GRANT SELECT ON incident_recall_keys TO incident_memory_reader';
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_projector') THEN
        EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON incident_recall_keys TO incident_memory_projector';
    END IF;
END
$$;
