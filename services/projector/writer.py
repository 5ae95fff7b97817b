"""One batch of Kafka records -> one Postgres transaction, exactly once.

The policy, in order:
- decode and map every record (pure); a record that does not decode or map is a dead letter;
- apply the whole batch in one transaction with its offsets (fast path);
- if the database refuses the batch for its data (IntegrityError/DataError), roll back and apply
  it again event by event, each under a savepoint, so only the offending event is dead-lettered;
- dead letters are produced and flushed BEFORE the transaction that skips them commits;
- the offsets stored in Postgres are locked at the start of the transaction and must equal what
  this writer expects; otherwise another projector (or an ambiguous commit) moved them, and the
  caller must re-seek. This fences zombies and makes a lost COMMIT acknowledgement harmless;
- Postgres or Kafka being unreachable is never the event's fault: back off and retry the same
  batch, advancing nothing, until it goes through or the writer is stopped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from confluent_kafka import KafkaError, Message, Producer

from schemas.events import DeadLetter
from services.projector import store
from services.projector.config import ProjectorConfig
from services.projector.decoding import Decoded, Incoming, Prepared, prepare
from services.projector.metrics import Metrics
from services.projector.plan import BatchResult, Items, Plan, Rejection, WriteOutcome
from services.runtime.kafka import dead_letter, producer_config
from services.runtime.logs import about

log = logging.getLogger("projector.writer")

DATA_ERRORS = (psycopg.IntegrityError, psycopg.DataError)
STAGE = "projector"


class OffsetConflict(Exception):
    """The offsets in Postgres are not where this writer left them: re-seek from Postgres."""


class Stopped(Exception):
    """The writer was asked to stop while waiting for Postgres or Kafka; nothing was committed."""


class DeliveryFailed(Exception):
    """Dead letters could not be flushed to Kafka: do not commit the offsets that skip them."""


@dataclass(kw_only=True, eq=False)
class BatchWriter:
    """Owns the Postgres connection and the DLQ producer of one projector (or one replay)."""

    config: ProjectorConfig  # where it writes (dsn, schema), whose offsets (group, topic), its DLQ
    producer: Producer
    metrics: Metrics | None = None
    notify: bool = True
    max_backoff: float = 5.0
    plans: Sequence[Plan] = store.PLANS  # the write plans store.apply_batch may choose from (tests pin one)
    # partition -> next offset stored in Postgres (None: none)
    expected: dict[int, int | None] = field(default_factory=dict, init=False)
    _conn: psycopg.Connection | None = field(default=None, init=False)

    # --- wiring --------------------------------------------------------------------------

    def connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop_connection()
            self._conn = store.connect(self.config.dsn, self.config.schema)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail; it is gone anyway
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._drop_connection()

    def retrying(self, what: str, action: Callable[[], Any], stop: threading.Event | None) -> Any:
        """Run `action` until it succeeds; infrastructure failures back off, they never skip data."""
        delay = 0.1
        while True:
            try:
                return action()
            except (OffsetConflict, Stopped):
                raise
            except (psycopg.Error, DeliveryFailed) as exc:
                if self._conn is not None and (
                    self._conn.broken or isinstance(exc, psycopg.OperationalError)
                ):
                    self._drop_connection()
                log.warning(
                    "%s failed, retrying in %.1fs: %s",
                    what,
                    delay,
                    " ".join(str(exc).strip().splitlines()[:1]),
                    extra=about(None, error=type(exc).__name__),
                )
                if self.metrics is not None:
                    self.metrics.retries.inc()
            if stop is None:
                time.sleep(delay)
            elif stop.wait(delay):
                raise Stopped(what)
            delay = min(delay * 2, self.max_backoff)

    def load_offsets(self, stop: threading.Event | None = None) -> dict[int, int]:
        return self.retrying(  # type: ignore[no-any-return]
            "load offsets",
            lambda: store.load_offsets(self.connection(), self.config.group, self.config.topic),
            stop,
        )

    def assign(self, partitions: Sequence[int], stored: dict[int, int]) -> None:
        for p in partitions:
            self.expected[p] = stored.get(p)

    def revoke(self, partitions: Sequence[int]) -> None:
        for p in partitions:
            self.expected.pop(p, None)

    # --- the batch -----------------------------------------------------------------------

    def write(self, batch: Sequence[Incoming], stop: threading.Event | None = None) -> WriteOutcome:
        """Project `batch` (partition order preserved) and commit it with its offsets, exactly once."""
        return self.write_prepared(prepare(batch), stop)

    def write_prepared(self, prepared: Prepared, stop: threading.Event | None = None) -> WriteOutcome:
        """Commit a batch `prepare` decoded (possibly in another thread, while the last one committed)."""
        decoded, next_offsets = prepared.decoded, prepared.next_offsets
        for d in decoded:
            if d.tokens_mismatch is not None:
                log.warning(
                    "event carries tokens=%d, projection counts %d; the projection's count is stored",
                    *d.tokens_mismatch,
                    extra=about(d.thread_ts, d.message_id),
                )
        outcome = self.retrying("project batch", lambda: self._commit(decoded, next_offsets), stop)
        for p, n in next_offsets.items():
            self.expected[p] = n
        return outcome  # type: ignore[no-any-return]

    def _commit(self, decoded: list[Decoded], next_offsets: dict[int, int]) -> WriteOutcome:
        conn = self.connection()
        items = [(k, d.ops) for k, d in enumerate(decoded) if d.error is None]
        try:
            with conn.transaction():
                result = self._apply(conn, items, next_offsets, notify=self.notify)
                self._check_offsets(result.stored_offsets, next_offsets)
                letters = self._letters(decoded, result.rejections)
                self._flush_dead_letters(letters, decoded)
        except DATA_ERRORS as exc:
            log.warning("batch of %d refused (%s); isolating the bad event", len(decoded), type(exc).__name__)
            return self._commit_one_by_one(conn, decoded, next_offsets)
        return self._outcome(decoded, result.rounds_committed, letters, next_offsets)

    def _commit_one_by_one(
        self, conn: psycopg.Connection, decoded: list[Decoded], next_offsets: dict[int, int]
    ) -> WriteOutcome:
        rejections: list[Rejection] = []
        rounds = 0
        with conn.transaction():
            for k, d in enumerate(decoded):
                if d.error is not None:
                    continue
                try:
                    with conn.transaction():  # a savepoint per event
                        one = self._apply(conn, [(k, d.ops)], {}, notify=False)
                    rejections.extend(one.rejections)
                    rounds += one.rounds_committed
                except DATA_ERRORS as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    rejections.append(
                        Rejection(k, f"database refused the row: {type(exc).__name__}: {first}")
                    )
            threads = sorted({d.thread_ts for d in decoded if d.thread_ts is not None})
            final = self._apply(conn, [], next_offsets, notify=self.notify, threads=threads)
            self._check_offsets(final.stored_offsets, next_offsets)
            letters = self._letters(decoded, rejections)
            self._flush_dead_letters(letters, decoded)
        return self._outcome(decoded, rounds, letters, next_offsets)

    def _apply(
        self,
        conn: psycopg.Connection,
        items: Items,
        next_offsets: dict[int, int],
        *,
        notify: bool,
        threads: Sequence[str] = (),
    ) -> BatchResult:
        """The writer's one call into the store: `items`, and `next_offsets` saved (and their stored
        values locked and returned) in the caller's transaction."""
        return store.apply_batch(
            conn,
            items,
            group=self.config.group,
            topic=self.config.topic,
            partitions=list(next_offsets),
            next_offsets=next_offsets,
            schema=self.config.schema,
            notify=notify,
            threads=threads,
            plans=self.plans,
        )

    def _check_offsets(self, stored: dict[int, int], next_offsets: dict[int, int]) -> None:
        for p in next_offsets:
            if stored.get(p) != self.expected.get(p):
                raise OffsetConflict(
                    f"partition {p}: Postgres holds next_offset {stored.get(p)}, this projector expected "
                    f"{self.expected.get(p)}"
                )

    def _letters(self, decoded: list[Decoded], rejections: list[Rejection]) -> list[tuple[int, DeadLetter]]:
        reasons = {k: d.error for k, d in enumerate(decoded) if d.error is not None}
        for r in rejections:
            reasons.setdefault(r.item, r.reason)
        letters = []
        for k in sorted(reasons):
            i = decoded[k].incoming
            letters.append(
                (
                    k,
                    dead_letter(
                        reasons[k] or "?", STAGE, i.value, self.config.topic, i.partition, i.offset, i.key
                    ),
                )
            )
        return letters

    def _flush_dead_letters(self, letters: list[tuple[int, DeadLetter]], decoded: list[Decoded]) -> None:
        if not letters:
            return
        failures: list[str] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failures.append(str(err))

        for k, letter in letters:
            self.producer.poll(0)
            self.producer.produce(
                self.config.dlq_topic,
                key=(letter.key or "").encode(),
                value=letter.to_bytes(),
                on_delivery=on_delivery,
            )
            d = decoded[k]
            log.warning(
                "dead letter: %s",
                letter.reason,
                extra=about(
                    d.thread_ts or letter.key,
                    d.message_id,
                    partition=letter.partition,
                    offset=letter.offset,
                ),
            )
        remaining = self.producer.flush(30)
        if remaining or failures:
            raise DeliveryFailed(f"{remaining} dead letters undelivered, errors: {failures[:3]}")

    def _outcome(
        self,
        decoded: list[Decoded],
        rounds: int,
        letters: list[tuple[int, DeadLetter]],
        next_offsets: dict[int, int],
    ) -> WriteOutcome:
        outcome = WriteOutcome(len(decoded) - len(letters), len(letters), rounds, dict(next_offsets))
        if self.metrics is not None:
            self.metrics.observe_commit(decoded, outcome, time.time())
        return outcome


def make_writer(config: ProjectorConfig, metrics: Metrics | None, *, notify: bool = True) -> BatchWriter:
    """The writer of a projection run, with a DLQ producer that sends at once (no linger)."""
    producer = Producer(producer_config(config.kafka, **{"linger.ms": 0}))
    return BatchWriter(config=config, producer=producer, metrics=metrics, notify=notify)
