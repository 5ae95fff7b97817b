"""Writers that follow the readers' switch: `--follow-switch VIEWS` on the compactor and the projector.

`rederive --switch NAME` moves every reader at once (a schema of views). The pipeline that keeps NAME
current must then be the live one: a compactor or projector given `--follow-switch VIEWS` reads the
views' pointer at start and writes whatever projection it names (its own arguments for the base one,
the run record's names for a re-derived one), then polls the pointer and, when a switch moves it,
stops cleanly (offsets committed) and re-executes itself with the same command line, which resolves
the new names. Nothing is lost or doubled: the new names' consumer groups resume from the offsets the
re-derivation committed, a record handled twice gives the same bytes (invariant 8) and the same row by
id (invariant 2), and the old group keeps its offsets for `--switch previous`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import psycopg

from schemas.projections import Writers, active_projection, rederived_writers
from services.runtime.errors import UserFacingError
from services.runtime.logs import about

log = logging.getLogger("incident_memory.follow_switch")

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Placement:
    """Where a writer writes: the base projection (its own arguments) or a re-derived one."""

    active: str | None  # what the pointer named (None: no switch yet)
    writers: Writers | None  # None: the base projection, as the service's arguments name it
    note: str | None = None  # why it writes the base although the pointer names another projection


def place(
    active: str | None, base_schema: str, record: Writers | None, events_topic: str | None
) -> Placement:
    """Pure: where a writer whose base projection is `base_schema` must write. A compactor gives its
    `events_topic` (a projection re-derived from another topic is not its to write); a projector None."""
    if active is None or active == base_schema:
        return Placement(active, None)
    if record is None:
        note = f"readers see {active!r}, which no re-derivation made: writing the base {base_schema!r}"
        return Placement(active, None, note)
    if events_topic is not None and record.events_topic != events_topic:
        note = (
            f"readers see {active!r}, re-derived from {record.events_topic!r}, not {events_topic!r}: "
            f"writing the base {base_schema!r}"
        )
        return Placement(active, None, note)
    return Placement(active, record)


@dataclass(frozen=True)
class SwitchFollower:
    dsn: str
    views: str
    base_schema: str
    events_topic: str | None
    service: str
    # why this process cannot write a re-derived projection (None: it can); the compactor checks
    # that its code makes the versions recorded with it
    refuse: Callable[[Writers], str | None] | None = None

    def resolve(self) -> Placement:
        """Read the pointer (and the run record behind it) now."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            active = active_projection(conn, self.views)
            record = None if active in (None, self.base_schema) else rederived_writers(conn, active)
        placement = place(active, self.base_schema, record, self.events_topic)
        reason = None if placement.writers is None or self.refuse is None else self.refuse(placement.writers)
        if reason is not None:
            placement = Placement(active, None, f"readers see {active!r}, but {reason}: writing the base "
                                  f"{self.base_schema!r}")  # fmt: skip
        return placement

    def start(self) -> Placement:
        """Where to write at start-up (its note, if any, logged); a one-line error without Postgres."""
        try:
            placement = self.resolve()
        except psycopg.OperationalError as exc:
            raise UserFacingError(
                f"--follow-switch: cannot reach Postgres: {' '.join(str(exc).split())}"
            ) from None
        self._warn(placement)
        return placement

    def _warn(self, placement: Placement) -> None:
        if placement.note:
            log.warning(placement.note, extra=about(None, None, views=self.views))

    def watch(
        self, serving: Placement, on_move: Callable[[], None], stop: threading.Event
    ) -> threading.Event:
        """Poll in a daemon thread until `stop`; when the placement changes, set the returned event
        and call `on_move` (which stops the service) once."""
        moved = threading.Event()

        def loop() -> None:
            failing, note = False, serving.note
            while not stop.wait(POLL_SECONDS):
                try:
                    now = self.resolve()
                except psycopg.Error as exc:  # keep writing where it is; say so once per outage
                    if not failing:
                        log.warning(
                            "cannot read the switch pointer; writing on",
                            extra=about(None, None, views=self.views, error=" ".join(str(exc).split())),
                        )
                    failing = True
                    continue
                failing = False
                if now.note != note:  # a new reason to stay on the base: said once, not every poll
                    note = now.note
                    self._warn(now)
                if now.writers != serving.writers:
                    target = now.writers.schema if now.writers else self.base_schema
                    log.info(
                        f"the switch moved readers to {now.active!r}: the {self.service} moves to {target!r}",
                        extra=about(None, None, views=self.views, schema=target),
                    )
                    moved.set()
                    on_move()
                    return

        threading.Thread(target=loop, name="follow-switch", daemon=True).start()
        return moved


def add_follow_switch_argument(parser: argparse.ArgumentParser, env: str) -> None:
    """`--follow-switch VIEWS` (default: the setting `env`), the same on every writer."""
    parser.add_argument(
        "--follow-switch",
        metavar="VIEWS",
        default=os.environ.get(env) or None,
        help=f"write whatever projection the readers' views VIEWS point at, and move when `rederive "
        f"--switch` does (default: {env} or off; docs/rederive.md)",
    )


def reexec() -> NoReturn:
    """Replace this process with the same command line (which resolves the new placement)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "services.cli", *sys.argv[1:]])
