"""`incident-memory recall THREAD [--k N] [--json] [--schema S]`: similar and concurrent incidents, with why.

Reads the profiles the projector keeps (schemas/recall.py); the thread's own channel decides what it
may see (RECALL_CHANNEL_GROUPS maps channels together), never an argument.
"""

from __future__ import annotations

import argparse
import json
import sys

from schemas.recall import RecallError, channel_groups, hits_json, recall
from services.projector.show import connect
from services.runtime import embeddings
from services.runtime.errors import BadInput
from services.runtime.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread")
    parser.add_argument("--k", type=int, default=5, help="historical hits to show (default 5)")
    parser.add_argument(
        "--json", action="store_true", help='a JSON list of {"thread","kind","score","reasons"}'
    )
    parser.add_argument("--schema", default="public")
    parser.add_argument("--dsn", default=None, help="Postgres DSN (default: DATABASE_URL or the local stack)")
    parser.add_argument(
        "--embeddings",
        metavar="MODEL",
        default=None,
        help=f"also compare discussions by this embedding model's vectors (default: {embeddings.MODEL_ENV}, "
        "else none); the endpoint is OPENAI_BASE_URL with OPENAI_API_KEY",
    )


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise BadInput("--k must be at least 1")
    dsn = args.dsn or Settings.from_env().database_url
    embed = embeddings.from_env(model=args.embeddings)
    with connect(dsn, args.schema) as conn:
        try:
            hits = recall(conn, args.thread, k=args.k, groups=channel_groups(), embed=embed)
        except RecallError as exc:
            raise BadInput(str(exc)) from None
    if embed is not None and embed.counts.failures:
        print(f"embeddings ({embed.model}) unavailable: scored without them", file=sys.stderr)
    if args.json:
        print(json.dumps(hits_json(hits), ensure_ascii=False))
        return 0
    if not hits:
        print(f"no similar or concurrent incident visible to thread {args.thread}")
    for h in hits:
        print(f"{h.kind:<10} {h.score:6.3f}  {h.thread_ts}")
        for reason in h.reasons:
            print(f"{'':18}- {reason}")
    return 0
