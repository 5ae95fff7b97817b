"""`incident-memory replay`: re-derive the projection from the topic (invariant 8).

Replay is the catch-up mode of the one projection runner: `source_catchup.CatchUpSource` reads
every partition directly (no consumer group), from the beginning or from the offsets stored in
the target schema, up to the high watermarks captured at start, through the same writer and loop
as the live projector. So a replay into an empty schema gives the same rows as the live
projection, and a live projector pointed at the replayed schema afterwards carries on from where
the replay stopped.
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass

from services.projector.config import ProjectorConfig, add_source_arguments, migrate_schema
from services.projector.metrics import Metrics
from services.projector.runner import ProjectionRunner
from services.projector.source_catchup import CatchUpSource
from services.projector.writer import make_writer
from services.runtime.errors import UserFacingError
from services.runtime.logs import configure_logging


@dataclass(frozen=True)
class ReplayResult:
    events: int
    dead_letters: int
    rounds_committed: int
    seconds: float
    end_offsets: dict[int, int]

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def replay(config: ProjectorConfig, *, from_beginning: bool = False, progress: bool = True) -> ReplayResult:
    """Project `config.topic` into `config.schema` up to the high watermarks of now, then return."""
    try:
        migrate_schema(config.dsn, config.schema)
    except Exception as exc:  # a bad DSN or an unreachable Postgres is the user's to fix
        raise UserFacingError(f"cannot prepare schema {config.schema!r}: {str(exc).strip()}") from None
    metrics = Metrics()
    source = CatchUpSource(config, from_beginning=from_beginning, progress=progress)
    stats = ProjectionRunner(source, make_writer(config, metrics), metrics).run(threading.Event())
    return ReplayResult(
        stats.events, stats.dead_letters, stats.rounds_committed, stats.seconds, dict(source.position)
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-beginning", action="store_true", help="ignore the offsets stored in the schema"
    )
    parser.add_argument("--into", default="public", metavar="SCHEMA", help="target Postgres schema (created)")
    add_source_arguments(parser, group_help="offsets are stored under this group name")
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    configure_logging("replay", "WARNING")
    config = ProjectorConfig.from_args(args, args.into)
    result = replay(config, from_beginning=args.from_beginning, progress=not args.no_progress)
    print(
        f"replayed {result.events:,} events into schema {args.into!r} in {result.seconds:.1f}s "
        f"({result.events_per_second:,.0f}/s); {result.rounds_committed:,} rounds published, "
        f"{result.dead_letters:,} dead letters"
    )
    return 0
