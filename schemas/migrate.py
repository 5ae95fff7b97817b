"""A small migration runner: applies `schemas/migrations/NNN_*.sql` in order, once each.

Applied migrations are recorded in `schema_migrations` with a checksum, so a
second run is a no-op and an edited, already-applied migration is an error.
Every migration runs in its own transaction under an advisory lock, so two
services starting at once do not race.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

_LOCK_KEY = 0x1C1DE17  # pg_advisory_xact_lock key shared by every runner


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


class MigrationError(RuntimeError):
    pass


def discover() -> list[Migration]:
    folder = resources.files("schemas") / "migrations"
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            version, _, rest = entry.name.partition("_")
            found.append(Migration(version, rest.removesuffix(".sql"), entry.read_text()))
    return found


def apply_migrations(conn: psycopg.Connection, schema: str = "public") -> list[str]:
    """Apply pending migrations into `schema` (created if missing). Returns the versions applied."""
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        # Create only what is missing: a service running as a least-privilege role (migration 004)
        # may check an up-to-date schema at start, and may create nothing.
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        if conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
            conn.execute(
                "CREATE TABLE schema_migrations ("
                " version text PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
        done = {v: c for v, c in conn.execute("SELECT version, checksum FROM schema_migrations").fetchall()}
        for migration in discover():
            if migration.version in done:
                if done[migration.version] != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version}_{migration.name} was edited after it was applied"
                    )
                continue
            conn.execute(migration.text.encode())
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (migration.version, migration.name, migration.checksum),
            )
            applied_now.append(migration.version)
    return applied_now
