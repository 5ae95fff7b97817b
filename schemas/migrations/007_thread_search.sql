-- search_thread(query): full-text search over one thread's human turns (services/agent/telemetry_mcp/
-- thread_search.py). The expression must match read_model.SEARCH_THREAD's exactly for the index to serve it;
-- the thread filter is the primary key's and thread_ts's own index, combined by a bitmap AND.
CREATE INDEX IF NOT EXISTS agent_messages_human_text
    ON agent_messages USING gin (to_tsvector('english'::regconfig, content ->> 'text'))
    WHERE role = 'human';
