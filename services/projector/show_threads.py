"""`incident-memory threads`: every incident thread with its status, rounds and token totals."""

from __future__ import annotations

import argparse

from schemas import read_model
from services.projector.show import connect
from services.runtime.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default="public")
    parser.add_argument("--dsn", default=None)


def run(args: argparse.Namespace) -> int:
    dsn = args.dsn or Settings.from_env().database_url
    with connect(dsn, args.schema) as conn:
        records = conn.execute(read_model.THREADS).fetchall()
    header = f"{'thread_ts':<20}  {'service':<18}  {'status':<13}  {'rounds':>6}  {'rows':>5}  {'in context':>10}  opened"
    print(header)
    print("-" * len(header))
    for thread_ts, service, status, rounds, opened_at, rows, tokens in records:
        print(
            f"{thread_ts:<20}  {service:<18}  {status:<13}  {rounds:>6}  {rows:>5}  {tokens:>10,}  "
            f"{opened_at.isoformat()}"
        )
    print(f"{len(records)} threads")
    return 0
