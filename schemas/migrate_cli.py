"""`incident-memory migrate [--schema S]`: apply the SQL migrations and create the topics.

Works against any DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS; checks both first, so a wrong
setting is a one-line error within the timeout.
"""

from __future__ import annotations

import argparse

from services.runtime.checks import check_kafka, check_postgres
from services.runtime.errors import UserFacingError
from services.runtime.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default="public", help="Postgres schema to migrate (created if missing)")
    parser.add_argument(
        "--replication-factor", type=int, default=1, help="replication of topics created (production: 3)"
    )
    parser.add_argument("--no-topics", action="store_true", help="only migrate Postgres")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for Kafka/Postgres")


def run(args: argparse.Namespace) -> int:
    import psycopg

    from schemas.migrate import MigrationError, apply_migrations
    from schemas.topics import ensure_topics

    settings = Settings.from_env()
    check_postgres(settings.database_url, timeout=args.timeout)
    if not args.no_topics:
        check_kafka(settings.kafka_bootstrap_servers, timeout=args.timeout)
    with psycopg.connect(settings.database_url, autocommit=True, connect_timeout=int(args.timeout)) as conn:
        try:
            applied = apply_migrations(conn, schema=args.schema)
        except MigrationError as exc:
            raise UserFacingError(str(exc)) from None
    print(f"schema {args.schema}: " + (f"applied {', '.join(applied)}" if applied else "up to date"))
    if not args.no_topics:
        created = ensure_topics(
            settings.kafka_bootstrap_servers, timeout=args.timeout, replication_factor=args.replication_factor
        )
        print("topics: " + (f"created {', '.join(created)}" if created else "all exist"))
    return 0
