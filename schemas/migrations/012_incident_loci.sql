-- Where an incident hurts (issue 37, concurrent recall): the troubled nodes (events on the Node object, a
-- node alert's node) and the failing dependencies (hosts of failed connections in error log lines, peers of
-- client spans that ended in error) its evidence names, most reported first (`schemas/incident_locus.py`).
-- Two incidents open together on one troubled node, or failing against one dependency, share a cause even
-- when their error patterns differ. A projection like the rest of the profile: the projector fills them as
-- it rebuilds a profile, so profiles written before this migration get them when next rebuilt (a replay or
-- `rederive` rebuilds all).

ALTER TABLE incident_profiles ADD COLUMN IF NOT EXISTS nodes text[] NOT NULL DEFAULT '{}';
ALTER TABLE incident_profiles ADD COLUMN IF NOT EXISTS dependencies text[] NOT NULL DEFAULT '{}';
