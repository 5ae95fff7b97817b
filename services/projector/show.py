"""`incident-memory show THREAD_TS [--raw ID]`: a thread's rows as the agent's memory holds them.

Each row shows its raw size beside what it costs in context, so the effect of
write-time compaction is visible row by row, with the totals underneath.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from schemas import read_model
from schemas.row_description import clip as _clip
from schemas.row_description import describe
from schemas.tokens import count_value_tokens
from services.runtime.checks import pg_error_text
from services.runtime.errors import UserFacingError
from services.runtime.settings import Settings


@dataclass(frozen=True)
class ShownRow:
    seq: int
    round: int | None
    role: str
    what: str
    raw_tokens: int
    context_tokens: int


def to_shown(record: tuple[Any, ...]) -> ShownRow:
    seq, round_, role, _id, _tcid, content, compact, tokens, tool = record
    return ShownRow(
        seq, round_, role, describe(role, content, compact, tool), count_value_tokens(content), tokens
    )


def render_table(rows: list[ShownRow]) -> str:
    """The fixed-width table with a totals row: seq, rnd, role, what, raw tok, in context."""
    header = f"{'seq':>4}  {'rnd':>3}  {'role':<5}  {'what':<52}  {'raw tok':>8}  {'in context':>10}"
    lines = [header, "-" * len(header)]
    for r in rows:
        rnd = "-" if r.round is None else str(r.round)
        lines.append(
            f"{r.seq:>4}  {rnd:>3}  {r.role:<5}  {_clip(r.what, 52):<52}  {r.raw_tokens:>8,}  {r.context_tokens:>10,}"
        )
    lines.append("-" * len(header))
    raw_total = sum(r.raw_tokens for r in rows)
    ctx_total = sum(r.context_tokens for r in rows)
    label = f"total ({len(rows)} rows)"
    lines.append(f"{'':>4}  {'':>3}  {'':<5}  {label:<52}  {raw_total:>8,}  {ctx_total:>10,}")
    return "\n".join(lines)


def fetch_rows(conn: psycopg.Connection, thread_ts: str) -> list[ShownRow]:
    return [to_shown(rec) for rec in conn.execute(read_model.THREAD_TABLE, (thread_ts,)).fetchall()]


def connect(dsn: str, schema: str) -> psycopg.Connection:
    """A connection, or one line naming why not; the DSN's password never printed (any psycopg.Error,
    a badly encoded DSN included, is caught)."""
    try:
        conn = psycopg.connect(dsn, connect_timeout=10, autocommit=True)
    except psycopg.Error as exc:
        raise UserFacingError(f"cannot connect to Postgres ({pg_error_text(exc, dsn)})") from None
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread_ts")
    parser.add_argument("--raw", metavar="ID", help="print one row's raw next to its compact")
    parser.add_argument("--schema", default="public")
    parser.add_argument("--dsn", default=None, help="Postgres DSN (default: DATABASE_URL or the local stack)")


def run(args: argparse.Namespace) -> int:
    dsn = args.dsn or Settings.from_env().database_url
    with connect(dsn, args.schema) as conn:
        if args.raw:
            found = conn.execute(
                read_model.ONE_ROW,
                (args.raw, args.thread_ts),
            ).fetchone()
            if found is None:
                raise UserFacingError(f"no row {args.raw!r} in thread {args.thread_ts!r}")
            content, compact, tokens = found
            print(f"== raw ({count_value_tokens(content):,} tokens, never sent to the model) ==")
            print(json.dumps(content, indent=2, ensure_ascii=False))
            print(f"== compact ({tokens:,} tokens, what the model sees) ==")
            print("NULL: the model is sent the raw" if compact is None else json.dumps(compact, indent=2))
            return 0
        rows = fetch_rows(conn, args.thread_ts)
        if not rows:
            raise UserFacingError(f"thread {args.thread_ts!r} has no visible rows in schema {args.schema!r}")
        print(render_table(rows))
    return 0
