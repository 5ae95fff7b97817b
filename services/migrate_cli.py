"""`incident-memory migrate [--schema S]`: apply the SQL migrations and create the topics.

Works against any DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS; checks both first, so a wrong
setting is a one-line error within the timeout.
"""

from __future__ import annotations

import argparse

from services.runtime.checks import check_kafka, check_postgres
from services.runtime.errors import KafkaRefused, UserFacingError
from services.runtime.kafka import admin_config
from services.runtime.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default="public", help="Postgres schema to migrate (created if missing)")
    parser.add_argument(
        "--replication-factor", type=int, default=1, help="replication of topics created (production: 3)"
    )
    parser.add_argument(
        "--min-insync-replicas",
        type=int,
        default=None,
        help="min.insync.replicas of topics created (production: 2; default: the broker's)",
    )
    parser.add_argument("--no-topics", action="store_true", help="only migrate Postgres")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for Kafka/Postgres")


def run(args: argparse.Namespace) -> int:
    import psycopg
    from confluent_kafka import KafkaException

    from schemas.migrate import MigrationError, apply_migrations
    from schemas.topics import ensure_topics

    isr = args.min_insync_replicas
    if isr is not None and not 1 <= isr <= args.replication_factor:
        raise UserFacingError(  # above the replication, every acks=all write would be refused
            f"--min-insync-replicas must be between 1 and --replication-factor ({args.replication_factor}), "
            f"got {isr}"
        )
    settings = Settings.from_env()
    check_postgres(settings.database_url, timeout=args.timeout)
    if not args.no_topics:
        check_kafka(settings.kafka, timeout=args.timeout)
    with psycopg.connect(settings.database_url, autocommit=True, connect_timeout=int(args.timeout)) as conn:
        try:
            applied = apply_migrations(conn, schema=args.schema)
        except MigrationError as exc:
            raise UserFacingError(str(exc)) from None
    print(f"schema {args.schema}: " + (f"applied {', '.join(applied)}" if applied else "up to date"))
    if not args.no_topics:
        try:
            created = ensure_topics(
                admin_config(settings.kafka),
                timeout=args.timeout,
                replication_factor=args.replication_factor,
                min_insync_replicas=args.min_insync_replicas,
            )
        except KafkaException as exc:
            raise KafkaRefused(
                f"could not create the topics as {settings.kafka.principal or 'this client'}: {exc.args[0].str()} "
                "(run migrate as a principal that may create topics, or create them yourself, or pass --no-topics)"
            ) from None
        print("topics: " + (f"created {', '.join(created)}" if created else "all exist"))
    return 0
