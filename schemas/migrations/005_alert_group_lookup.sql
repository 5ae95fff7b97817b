-- Ingest asks the read model which incident an Alertmanager group last opened (by its groupKey),
-- so that a group keeps its thread while open (services/ingest/directory.py, GroupDirectory).
CREATE INDEX IF NOT EXISTS agent_messages_alert_group
    ON agent_messages ((content -> 'alert' ->> 'groupKey'))
    WHERE role = 'alert';
