"""The local stack's read-only login for the review page: a LOGIN role IN incident_memory_reader.

Production gives the page its own login the same way (docs/review.md); locally the owner, which may
create roles (deploy/local/postgres_node.py), makes this one with a fixed local-only password.
"""

from __future__ import annotations

import contextlib

import psycopg
from psycopg import sql

from services.review.main import LOCAL_REVIEW_USER

READER_GROUP = "incident_memory_reader"


def ensure_review_login(owner_dsn: str) -> str:
    """Create the review login if missing (idempotent) and return its DSN."""
    with psycopg.connect(owner_dsn, autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (LOCAL_REVIEW_USER,)).fetchone()
        if exists is None:
            with contextlib.suppress(psycopg.errors.DuplicateObject):  # another process made it first
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                        sql.Identifier(LOCAL_REVIEW_USER),
                        sql.Literal(LOCAL_REVIEW_USER),
                        sql.Identifier(READER_GROUP),
                    )
                )
    return psycopg.conninfo.make_conninfo(owner_dsn, user=LOCAL_REVIEW_USER, password=LOCAL_REVIEW_USER)
