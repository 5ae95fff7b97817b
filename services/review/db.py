"""The review page's only door to Postgres: a read-only role, read-only transactions, one schema.

It refuses to serve when its login could write any table of the schema (`WRITABLE_TABLES`), so a
DSN of the owner or the projector is a one-line error at start, not a page that could write. Every
connection also runs with `default_transaction_read_only`: a second lock, not the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool

from services.review import queries
from services.runtime.errors import UserFacingError


def _options(schema: str) -> str:
    return f"-c search_path={schema} -c default_transaction_read_only=on -c statement_timeout=10000"


def writable_tables(dsn: str, schema: str) -> list[str]:
    """The tables of `schema` this login could insert into, update, delete from or truncate."""
    try:
        with psycopg.connect(dsn, connect_timeout=10, autocommit=True, options=_options(schema)) as conn:
            if conn.execute("SELECT to_regclass('agent_messages')").fetchone() == (None,):
                raise UserFacingError(f"schema {schema!r} holds no projection (no agent_messages table)")
            return [str(r[0]) for r in conn.execute(queries.WRITABLE_TABLES).fetchall()]
    except psycopg.OperationalError as exc:
        raise UserFacingError(f"cannot connect to Postgres: {str(exc).strip().splitlines()[0]}") from None


class Reader:
    """A small pool of read-only connections to one schema."""

    def __init__(self, dsn: str, schema: str, *, size: int = 4) -> None:
        writable = writable_tables(dsn, schema)
        if writable:
            raise UserFacingError(
                f"the review page runs only as a read-only role, and this login can write {', '.join(writable)}"
                " in schema "
                + repr(schema)
                + ": give it a login IN ROLE incident_memory_reader (docs/review.md)"
            )
        self.schema = schema
        self._pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True, "options": _options(schema), "connect_timeout": 10},
            open=True,
            name="review",
        )

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self._pool.close()
