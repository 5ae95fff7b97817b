-- The nodes an incident's pods ran on (issue 37, concurrent recall): the `source.host` of its Warning pod
-- events (`schemas/incident_locus.pod_event_hosts`). Another incident that reports one of these nodes in
-- trouble shares a cause with it (`schemas/recall_scoring.shared_locus`), though the pods' own node did not
-- make it a troubled one. A column of its own beside `nodes` (the troubled nodes), filled by the projector
-- as it rebuilds a profile: profiles written before get it when next rebuilt (a replay or `rederive`).

ALTER TABLE incident_profiles ADD COLUMN IF NOT EXISTS pod_hosts text[] NOT NULL DEFAULT '{}';
