"""`incident-memory review`: serve the read-only review page (default http://127.0.0.1:8090).

It binds to loopback unless told otherwise: in a cluster it sits behind the team's auth proxy
(deploy/k8s, docs/review.md). Its login must be read-only (services/review/db.py checks it at start).
"""

from __future__ import annotations

import argparse
import os
import re

from services.runtime import settings
from services.runtime.errors import BadInput

LOCAL_REVIEW_USER = "incident_memory_review"
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_CHANNEL = re.compile(r"^[A-Z0-9]{1,32}$")


def default_dsn() -> str:
    """REVIEW_DATABASE_URL, else the local stack's read-only review login (deploy/local/review_login.py)."""
    return os.environ.get("REVIEW_DATABASE_URL") or (
        f"postgresql://{LOCAL_REVIEW_USER}:{LOCAL_REVIEW_USER}@127.0.0.1:{settings.LOCAL_PG_PORT}/{settings.LOCAL_PG_DB}"
    )


def channel_allow_list(text: str | None) -> frozenset[str] | None:
    """`C01,C02` -> those channels only; empty or unset -> every channel."""
    if not text:
        return None
    channels = frozenset(c.strip() for c in text.split(",") if c.strip())
    bad = sorted(c for c in channels if not _CHANNEL.match(c))
    if bad:
        raise BadInput(f"--channels: not a Slack channel id: {bad[0]!r}")
    return channels


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--schema", default="public", help="the projection's Postgres schema")
    parser.add_argument(
        "--dsn", default=None, help="a read-only login (default REVIEW_DATABASE_URL or local)"
    )
    parser.add_argument(
        "--channels",
        default=os.environ.get("REVIEW_CHANNELS"),
        help="show only threads of these Slack channels (comma-separated; default REVIEW_CHANNELS, else all)",
    )

    parser.add_argument(
        "--show-secrets",
        action="store_true",
        help="show raws verbatim, without the redactor's typed markers (an operator's explicit choice)",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from services.review.db import Reader
    from services.review.web import build_app

    if not _SCHEMA.match(args.schema):
        raise BadInput(f"--schema: not a schema name: {args.schema!r}")
    channels = channel_allow_list(args.channels)
    reader = Reader(args.dsn or default_dsn(), args.schema)
    print(f"review: http://{args.host}:{args.port}/ (schema {args.schema}, read-only)", flush=True)
    try:
        uvicorn.run(
            build_app(reader, channels, redact=not args.show_secrets),
            host=args.host,
            port=args.port,
            log_level="warning",
        )
    finally:
        reader.close()
    return 0
