#!/bin/sh
# Run once by the postgres image on a new data volume (/docker-entrypoint-initdb.d): one login for
# the projector and one for the readers (agent, Slack poster, ingest), members of the group roles
# that migration 004 grants on every schema it migrates. The owner (POSTGRES_USER) runs `migrate`.
# An existing volume does not run this: create the roles yourself (deploy/README.md, "Postgres roles").
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v projector_pw="$PROJECTOR_DB_PASSWORD" -v reader_pw="$READER_DB_PASSWORD" <<'SQL'
CREATE ROLE incident_memory_projector NOLOGIN;
CREATE ROLE incident_memory_reader NOLOGIN;
CREATE ROLE im_projector LOGIN PASSWORD :'projector_pw' IN ROLE incident_memory_projector;
CREATE ROLE im_reader LOGIN PASSWORD :'reader_pw' IN ROLE incident_memory_reader;
SQL
