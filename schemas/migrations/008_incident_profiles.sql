-- Recall across incidents (invariant 14): one fact per event that says something about an incident,
-- and the incident's profile rebuilt from all of its facts in the same transaction as the rows.
-- Both are projections: a replay into an empty schema rebuilds them identically.
-- pg_trgm is not used: an extension lives in one schema and the projection's schemas are dropped
-- and re-created (tests, rederive); full-text search is built in and enough here.

CREATE TABLE IF NOT EXISTS incident_profile_facts (
    thread_ts  text        NOT NULL,
    source_id  text        NOT NULL,   -- the event's message id: a duplicate delivery is one fact
    kind       text        NOT NULL,
    in_round   boolean     NOT NULL,   -- counted only once its round is visible (invariant 3)
    at         timestamptz NOT NULL,
    facts      jsonb       NOT NULL,
    PRIMARY KEY (thread_ts, source_id)
);

CREATE TABLE IF NOT EXISTS incident_profiles (
    thread_ts       text PRIMARY KEY,
    alertname       text,
    service         text,
    namespace       text,
    cluster         text,
    severity        text,
    channel         text,
    private         boolean     NOT NULL,
    opened_at       timestamptz,
    resolved_at     timestamptz,
    patterns        jsonb       NOT NULL,   -- skeleton -> count
    signatures      text[]      NOT NULL,   -- the skeletons, for overlap search
    error_patterns  text[]      NOT NULL,
    reasons         jsonb       NOT NULL,   -- pod-event reason -> count
    reason_keys     text[]      NOT NULL,
    shapes          text[]      NOT NULL,
    claims          text[]      NOT NULL,
    decisions       text[]      NOT NULL,
    discussion      text        NOT NULL,
    discussion_tsv  tsvector    NOT NULL,
    profile_sha256  text        NOT NULL    -- of the canonical profile: replays are compared by it
);
CREATE INDEX IF NOT EXISTS incident_profiles_signatures ON incident_profiles USING gin (signatures);
CREATE INDEX IF NOT EXISTS incident_profiles_reasons ON incident_profiles USING gin (reason_keys);
CREATE INDEX IF NOT EXISTS incident_profiles_tsv ON incident_profiles USING gin (discussion_tsv);
CREATE INDEX IF NOT EXISTS incident_profiles_channel_opened ON incident_profiles (channel, opened_at);
CREATE INDEX IF NOT EXISTS incident_profiles_service ON incident_profiles (service, alertname);

-- How many incidents hold each pattern signature (and `reason:<Reason>`; `#incidents` counts them all),
-- kept by the projector as profiles change, so recall weighs rarity (IDF) without counting at query time.
CREATE TABLE IF NOT EXISTS incident_signature_counts (
    key  text PRIMARY KEY,
    n    integer NOT NULL
);

DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_reader') THEN
        EXECUTE format('GRANT SELECT ON incident_profile_facts, incident_profiles, incident_signature_counts TO incident_memory_reader');
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_projector') THEN
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON incident_profile_facts, incident_profiles, incident_signature_counts '
                       'TO incident_memory_projector');
    END IF;
END
$$;
