-- Least privilege: one role per kind of access, granted on this schema's tables. They are group
-- roles (NOLOGIN): an operator gives each service its own login role IN one of them, e.g.
--   CREATE ROLE im_agent LOGIN PASSWORD '...' IN ROLE incident_memory_reader;
-- The owner that runs these migrations keeps the tables. Roles are cluster-wide: they are created
-- once (when the migrating role may create roles) and granted again in every schema migrated.
--   incident_memory_projector: writes the projection and its offsets (the projector, `replay`).
--   incident_memory_reader:    reads only (the agent, the telemetry MCP server, `show`, the Slack
--                              poster and ingest's thread directory).
DO $$
DECLARE
    can_create boolean := (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user);
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_projector') THEN
        IF can_create THEN
            CREATE ROLE incident_memory_projector NOLOGIN;
        ELSE
            RAISE NOTICE 'role incident_memory_projector not created: % may not create roles', current_user;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_reader') THEN
        IF can_create THEN
            CREATE ROLE incident_memory_reader NOLOGIN;
        ELSE
            RAISE NOTICE 'role incident_memory_reader not created: % may not create roles', current_user;
        END IF;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_reader') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO incident_memory_reader', current_schema());
        EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO incident_memory_reader', current_schema());
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO incident_memory_reader',
                       current_schema());
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'incident_memory_projector') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO incident_memory_projector', current_schema());
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO incident_memory_projector',
                       current_schema());
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO incident_memory_projector',
                       current_schema());
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES '
                       'TO incident_memory_projector', current_schema());
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES '
                       'TO incident_memory_projector', current_schema());
    END IF;
END
$$;
