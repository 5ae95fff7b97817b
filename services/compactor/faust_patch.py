"""faust-streaming 0.15.3, patched where it loses, duplicates or stops reading records (the worker uses
`PatchedTransport` and `PatientTableManager`).

Every fix here reads faust's and aiokafka's internals (`_getmany`, `_settings_extra`, the flow control
around recovery, the recovery's waits), so it is right for the faust version it was written for and no
other: importing this module under another faust-streaming version stops with one line, instead of
running a patch over code that may have moved. To upgrade faust: re-read each hole below against the
new code, re-run tests/compactor/test_seek_guard.py, test_recovery_patience.py,
test_two_worker_duplicates.py and test_producer_idempotence.py, then change FAUST_VERSION (and the pin
in pyproject.toml).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterable
from typing import Any, ClassVar

import faust
from faust.tables.manager import TableManager
from faust.tables.recovery import RebalanceAgain, Recovery, ServiceStopped
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, ConsumerT, ProducerT
from mode.utils.times import Seconds, want_seconds

from services.runtime.errors import UserFacingError
from services.runtime.logs import about

FAUST_VERSION = "0.15.3"  # what every patch below was written against (pyproject.toml pins it)

if faust.__version__ != FAUST_VERSION:
    raise UserFacingError(
        f"faust-streaming {faust.__version__} is installed, but the compactor's faust patch "
        f"(services/compactor/faust_patch.py) was written for {FAUST_VERSION}: install {FAUST_VERSION}"
    )

log = logging.getLogger("incident_memory.compactor")


# How long the broker may hold a fetch that finds no new record. faust 0.15.3 hard-codes 1,500 ms, and
# aiokafka leaves out of a fetch every partition whose records are still buffered: a record arriving
# on such a partition waits for the in-flight fetch to end, so up to 1.5 s (the end-to-end bench's
# stalls: the compactor's event loop idle in py-spy while its fetch was held). An idle worker then
# sends a fetch every FETCH_MAX_WAIT_MS; the CPU it costs is in BENCHMARKS.md.
FETCH_MAX_WAIT_MS = int(os.environ.get("COMPACTOR_FETCH_MAX_WAIT_MS", "20"))


class LowLatencyConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """faust's consumer thread, its aiokafka consumer holding a fetch at most FETCH_MAX_WAIT_MS."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read by start(), which builds the fetcher
        return consumer


class NoLossConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer, closing two holes that lose records of a new consumer group.

    Found on the replay (a new app id = a new group, a selections changelog that is not
    empty): the first record(s) of a partition never came out. faust 0.15.3 drops records
    it has already fetched in two places and counts on `perform_seek` to read them again,
    but aiokafka's `seek_to_committed` only seeks when the committed offset is > 0: with no
    committed offset (a new group) the position stays past them and they are lost
    (invariant 12).

    1. `getmany` hands the consumer thread faust's *live* set of active partitions. When
       recovery pauses the changelog partitions while that call is queued, the set is empty
       by the time aiokafka runs, and aiokafka's fetcher reads an empty set as "every
       partition": it returns (and moves past) the stream records, and faust drops them
       because they are not active. `_getmany` below passes a snapshot, and never an empty one.
    2. `Recovery.on_recovery_completed` resumes the stream partitions, awaits `perform_seek`
       (records fetched meanwhile are queued for the agent), then `app.flow_control.resume()`
       clears the stream queues. Stream (non-changelog) partitions resumed there are held
       back until `resume_flow()`, which faust calls right after that clear: nothing of theirs
       is fetched into a queue that is about to be cleared, and their order is kept. faust's
       pause/resume only choose which partitions `getmany` asks for, so holding costs nothing.
    3. On a rebalance, faust clears the records it had fetched but not processed and seeks
       every partition to its committed offset (`perform_seek`). For a partition the worker
       keeps, the first records fetched after that seek sometimes still come from the old
       position (a fetch issued before the seek), so the cleared records between the two
       are skipped: 1-4 records in about 1 rebalance in 15 under load
       (tests/compactor/test_two_worker_duplicates.py). `getmany` below compares each
       partition's first record after a seek with the offset it was sought to; when the
       record is past it, it drops that partition's records from the batch and seeks again.
       The records in between are then read again (repeats, never gaps). Only the first
       record after a seek is checked, so a real gap (transaction markers) is never re-read
       twice.
    """

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return LowLatencyConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: set[TP] = set()
        self._resume_at: dict[TP, int] = {}  # stream partition -> committed offset it was just sought to

    async def perform_seek(self) -> None:
        await super().perform_seek()
        self._resume_at = {
            tp: offset
            for tp, offset in self._committed_offset.items()
            if offset is not None and not self._is_changelog_tp(tp)
        }

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        """faust's getmany, minus records from a position the last seek did not take (hole 3)."""
        stale: set[TP] = set()
        async for tp, message in super().getmany(timeout):
            if tp in stale:
                continue
            sought = self._resume_at.pop(tp, None)
            if sought is not None and message.offset > sought:
                log.warning(
                    "records after a seek start past it: reading the partition again from the seek",
                    extra=about(None, None, partition=tp.partition, offset=message.offset, sought=sought),
                )
                stale.add(tp)
                await self.seek(tp, sought)
                continue
            yield tp, message

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> Any:
        if active_partitions is not None:
            active_partitions = set(active_partitions)  # a snapshot, not faust's live set
            if not active_partitions:
                await asyncio.sleep(min(timeout, 0.1))
                return {}
        return await super()._getmany(active_partitions, timeout)

    def pause_partitions(self, tps: Iterable[TP]) -> None:
        tpset = set(tps)
        self._held.difference_update(tpset)
        super().pause_partitions(tpset)

    def resume_partitions(self, tps: Iterable[TP]) -> None:
        tpset = set(tps)
        stream = {tp for tp in tpset if not self._is_changelog_tp(tp)}
        self._held.update(stream)  # still paused: resumed by resume_flow()
        super().resume_partitions(tpset - stream)

    def resume_flow(self) -> None:
        super().resume_flow()
        held, self._held = self._held, set()
        assigned = self.assignment()
        if held & assigned:
            super().resume_partitions(held & assigned)


class IdempotentProducer(faust_aiokafka.Producer):
    """faust's aiokafka producer with acks=all and idempotence, always.

    faust 0.15.3 asks aiokafka for idempotence only inside a transaction (`_settings_extra`, under
    exactly_once). Under at_least_once, a batch whose ack was lost (a broker killed mid-request, a
    leader moving) is sent again and written twice; with idempotence the broker recognises the retry
    by producer id and sequence number and keeps one copy. The threaded producer and every
    transactional producer read the same settings."""

    def _settings_extra(self) -> dict[str, Any]:
        return {**super()._settings_extra(), "acks": "all", "enable_idempotence": True}


class PatchedTransport(faust_aiokafka.Transport):
    Consumer: ClassVar[type[ConsumerT]] = NoLossConsumer
    Producer: ClassVar[type[ProducerT]] = IdempotentProducer


class PatientRecovery(Recovery):
    """faust's table recovery, which no longer ends for good when the broker is slow (hole 4).

    Each step of a recovery (the producer's flush, the offsets and highwaters, the seek of the stream
    partitions to their committed offsets) is awaited for at most `broker_request_timeout`. When a
    step takes longer, faust 0.15.3 reports it as if the worker were stopping (`ServiceStopped`),
    and the recovery task ends at a debug-level line: the worker stays up, its heartbeat and its
    group membership too, and it never reads a record again, through every later rebalance. Found
    in CI: a compactor whose first seek to the committed offsets waited on the group coordinator
    compacted nothing in three minutes, with no line in its log. Here a step that outlives the
    timeout is awaited again, with a warning each period; a real stop or a new rebalance still ends
    the wait as before. While it waits the app has not started, so `/healthz` does not say ready.
    """

    async def _wait(self, coro: Any, timeout: Seconds | None = None) -> None:
        step = asyncio.ensure_future(coro)
        waited = 0.0
        try:
            while True:
                await self.wait_first(
                    asyncio.shield(step),
                    self.signal_recovery_start,  # type: ignore[arg-type]
                    timeout=timeout,  # type: ignore[arg-type]
                )
                if step.done():
                    step.result()  # a step's own error is raised, as in faust
                    return None
                if self.signal_recovery_start.is_set():  # a new rebalance, as faust reads it
                    raise RebalanceAgain()
                if timeout is None or self.should_stop or self._crashed.is_set():
                    raise ServiceStopped()
                waited += want_seconds(timeout)
                log.warning(
                    "a step of the table recovery is still waiting for the broker; records flow once it ends",
                    extra=about(
                        None, None, waited_s=round(waited, 1), step=getattr(coro, "__qualname__", "")
                    ),
                )
        finally:
            if not step.done():
                step.cancel()


class PatientTableManager(TableManager):
    """faust's table manager, its recovery the `PatientRecovery` above (`faust.App(TableManager=...)`)."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = PatientRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
