-- round_staging is only ever read by id (the projector's round markers, get_evidence, the
-- agent's digest read-back), never by (thread_ts, round): that index only made every staged
-- row cost one more B-tree insert and delete on the projector's hot path.
DROP INDEX IF EXISTS round_staging_thread_round;
