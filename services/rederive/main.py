"""`incident-memory rederive`: re-derive the context through a new compactor, blue/green, with a diff.

rederive --into NAME     compactor (its own app id) from the beginning of incident.events into
                         incident.compacted.NAME, projected into schema NAME, beside the live
                         pipeline; progress with an ETA; rerun to resume; then the diff against
                         what readers see now (a table, and JSON).
rederive --switch NAME   point the readers' views (`live`) at schema NAME in one transaction
                         (`previous`: back to the one before).
rederive --drop-old      drop the previous projection (its schema, topics and groups).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

import psycopg

from schemas import topics
from schemas.compact_diff import diff, render
from services.rederive import switch as views_switch
from services.rederive.names import DEFAULT_VIEWS_SCHEMA, Names, check_name, names_for
from services.rederive.progress import committed, high_watermarks, projected, remaining
from services.rederive.run import RunConfig, compactor_worker, rederive, run_record, write_json
from services.rederive.snapshot import snapshot
from services.runtime.errors import BadInput, UserFacingError
from services.runtime.settings import Settings, state_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--into", metavar="NAME", help="re-derive into schema NAME (rerun to resume)")
    what.add_argument("--switch", metavar="NAME", help="point the readers' views at NAME ('previous': back)")
    what.add_argument("--drop-old", action="store_true", help="drop the previous projection")
    what.add_argument("--diff", metavar="NAME", help="print the diff of NAME against the active projection")
    parser.add_argument(
        "--views", default=DEFAULT_VIEWS_SCHEMA, help="the readers' schema of views (default: %(default)s)"
    )
    parser.add_argument(
        "--against",
        default=None,
        metavar="SCHEMA",
        help="diff against this schema (default: the active one, else public)",
    )
    parser.add_argument("--events-topic", default=topics.EVENTS)
    parser.add_argument(
        "--selections-topic", default=topics.SELECTIONS,
        help="the compactor's selection changelog, shared with the live compactor so that recorded choices are reused",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="compactor workers started here (default: 1)")
    parser.add_argument(
        "--worker", action="store_true",
        help="with --into: only one more compactor worker of NAME, exiting when the group is caught up (a Job pod)",
    )  # fmt: skip
    parser.add_argument("--selector", default=None, help="the compactor's --selector (default: its own)")
    parser.add_argument("--budget", type=int, default=None, help="the compactor's --budget")
    parser.add_argument("--batch-size", type=int, default=2000, help="the projector's --batch-size")
    parser.add_argument(
        "--follow", action="store_true", help="after catching up, keep following the live tail"
    )
    parser.add_argument(
        "--report", type=Path, default=None, help="diff JSON path (default: <state>/rederive/NAME/diff.json)"
    )
    parser.add_argument("--no-diff", action="store_true", help="skip the diff after catching up")
    parser.add_argument(
        "--max-lag", type=int, default=100, help="--switch: refuse a projection more records behind"
    )
    parser.add_argument("--no-progress", action="store_true")


def _dsn() -> str:
    return Settings.from_env().database_url


def _connect(dsn: str) -> psycopg.Connection:
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise UserFacingError(f"cannot connect to Postgres: {' '.join(str(exc).split())}") from None


def _state(name: str) -> Path:
    return state_dir() / "rederive" / name


def _active(conn: psycopg.Connection, views: str, against: str | None) -> str:
    if against:
        return against
    pointer = views_switch.read_pointer(conn, views)
    return pointer.active if pointer is not None else "public"


def print_diff(names: Names, against: str | None, views: str, report: Path | None) -> int:
    settings = Settings.from_env()
    with _connect(settings.database_url) as conn:
        before_schema = _active(conn, views, against)
        if before_schema == names.schema:
            raise UserFacingError(f"{names.schema!r} is the active projection: give --against SCHEMA")
        views_switch.check_projection(conn, before_schema)
        views_switch.check_projection(conn, names.schema)
        before = snapshot(conn, before_schema)
        after = snapshot(conn, names.schema, kafka=settings.kafka, dlq_topic=names.dlq_topic)
    result = diff(before, after)
    print(render(result))
    path = report or _state(names.name) / "diff.json"
    write_json(path, result.to_json())
    print(f"diff written to {path}")
    return 0


def run_into(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise BadInput(f"--workers must be at least 1, got {args.workers}")
    if args.budget is not None and args.budget < 1:
        raise BadInput(f"--budget must be a positive integer, got {args.budget}")
    settings = Settings.from_env()
    names = names_for(args.into, args.events_topic)
    cfg = RunConfig(
        names=names,
        kafka=settings.kafka,
        dsn=settings.database_url,
        state=_state(names.name),
        selections_topic=args.selections_topic,
        workers=args.workers,
        selector=args.selector,
        budget=args.budget,
        batch_size=args.batch_size,
        progress=not args.no_progress,
    )
    if args.worker:
        return run_worker(cfg)
    try:
        result = rederive(cfg, follow=args.follow)
    except KeyboardInterrupt:
        print(f"rederive {names.name}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    this_run = "" if result.this_run == result.events else f", {result.this_run:,} of them in this run"
    print(
        f"rederived {result.events:,} events{this_run} into schema {names.schema!r} ({result.rows:,} rows) "
        f"in {result.seconds:.1f}s ({result.events_per_second:,.0f}/s); the selector was asked "
        f"{result.selector_calls:,} times (recorded choices reused for every unchanged compactor version)"
    )
    if args.no_diff:
        return 0
    with _connect(settings.database_url) as conn:
        active = _active(conn, args.views, args.against)
    if active == names.schema:
        print(f"no diff: {names.schema!r} is what readers see now (give --against SCHEMA to compare)")
        return 0
    return print_diff(names, args.against, args.views, args.report)


def run_worker(cfg: RunConfig) -> int:
    worker = f"{socket.gethostname()}-{os.getpid()}"
    try:
        result = compactor_worker(cfg, worker)
    except KeyboardInterrupt:
        print(f"rederive {cfg.names.name}: worker {worker} interrupted", file=sys.stderr)
        return 130
    print(
        f"rederive {cfg.names.name}: worker {worker} done: the group has compacted {result.events:,} "
        f"records in {result.seconds:.1f}s; this worker asked the selector {result.selector_calls:,} times"
    )
    return 0


def _lag(conn: psycopg.Connection, schema: str) -> tuple[int, int] | None:
    """(compactor lag, projector lag) of a re-derived schema, now; None for a schema no rederive made."""
    record = run_record(conn, schema)
    if record is None:
        return None
    if record.get("caught_up_at") is None:
        raise UserFacingError(
            f"schema {schema!r} is not caught up: its rederive has not finished "
            f"(run `incident-memory rederive --into {schema}`)"
        )
    kafka = Settings.from_env().kafka
    events = high_watermarks(kafka, str(record["events_topic"]))
    compactor = committed(kafka, str(record["app_id"]), str(record["events_topic"]), sorted(events))
    compacted = high_watermarks(kafka, str(record["compacted_topic"]))
    stored = projected(conn, schema, str(record["projector_group"]), str(record["compacted_topic"]))
    return remaining(events, compactor), remaining(compacted, stored)


def run_switch(args: argparse.Namespace) -> int:
    views = args.views
    if not views.replace("_", "a").isalnum():
        raise BadInput(f"--views {views!r} is not a plain schema name")
    target = args.switch
    if target not in ("previous", "public"):
        check_name(target)
    with _connect(_dsn()) as conn:
        if target == "previous":
            pointer = views_switch.read_pointer(conn, views)
            if pointer is None or pointer.previous is None:
                raise UserFacingError(f"no previous projection is recorded behind {views!r}")
            target = pointer.previous
        views_switch.check_projection(conn, target)
        lag = _lag(conn, target)
        if lag is not None and sum(lag) > args.max_lag:
            raise UserFacingError(
                f"schema {target!r} is not caught up: {lag[0]:,} records behind in its compactor and "
                f"{lag[1]:,} in its projector (--max-lag {args.max_lag}); run "
                f"`incident-memory rederive --into {target} --follow` beside the live pipeline"
            )
        pointer = views_switch.switch(conn, views, target)
    previous = f"; previous: {pointer.previous}" if pointer.previous else ""
    print(f"readers of schema {views!r} now read {pointer.active!r}{previous}")
    return 0


def run_drop_old(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    with _connect(settings.database_url) as conn:
        pointer = views_switch.read_pointer(conn, args.views)
        record = run_record(conn, pointer.previous) if pointer and pointer.previous else None
        dropped = views_switch.forget_previous(conn, args.views)
    if record is not None:
        _delete_kafka(settings, record)
    print(f"dropped the previous projection {dropped!r}")
    return 0


def _delete_kafka(settings: Settings, record: dict[str, object]) -> None:
    """The dropped run's own topics and consumer groups (never the shared events or selections topics)."""
    from confluent_kafka.admin import AdminClient

    from services.runtime.kafka import admin_config

    admin = AdminClient(admin_config(settings.kafka))
    own = [str(record["compacted_topic"]), str(record["dlq_topic"])]
    for future in admin.delete_topics(own, operation_timeout=30).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            print(f"note: {exc}", file=sys.stderr)
    for future in admin.delete_consumer_groups(
        [str(record["app_id"]), str(record["projector_group"])]
    ).values():
        try:
            future.result(timeout=30)
        except Exception as exc:  # a group never committed to Kafka does not exist there
            if "GROUP_ID_NOT_FOUND" not in str(exc):
                print(f"note: {exc}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for flag in ("worker", "follow", "no_diff"):
        if getattr(args, flag) and args.into is None:
            raise BadInput(f"--{flag.replace('_', '-')} goes with --into NAME")
    try:
        return _run(args)
    except psycopg.Error as exc:  # Postgres refused something: one line, not a traceback
        raise UserFacingError(f"Postgres: {' '.join(str(exc).split())}") from None


def _run(args: argparse.Namespace) -> int:
    if args.into is not None:
        return run_into(args)
    if args.switch is not None:
        return run_switch(args)
    if args.diff is not None:
        return print_diff(names_for(args.diff, args.events_topic), args.against, args.views, args.report)
    return run_drop_old(args)
