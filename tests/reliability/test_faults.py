"""kill -9 each service mid-stream (and restart the shared Postgres), then check every invariant."""

from __future__ import annotations

import threading

import pytest

from deploy.local.external import local_stack_only
from deploy.local.stack import restart_postgres

from .harness import (
    Pipeline,
    assert_compacts_identical,
    check_invariants,
    expected_ids,
    produce_events,
    raw_threads,
    wait_until,
)

pytestmark = pytest.mark.reliability


# The projector's case runs in `make test` too (`fast`). The compactor's waits out the killed member's
# group session (about a minute) before its restart gets the partitions back: `make test-reliability`
# only, beside tests/compactor's rebalance tests, which `make test` runs.
@pytest.mark.parametrize("victim", ["compactor", pytest.param("projector", marks=pytest.mark.fast)])
def test_kill_9_mid_stream_then_restart(pipeline: Pipeline, victim: str, record: dict[str, object]) -> None:
    events = raw_threads(150)  # 3,300 events
    comp, proj = pipeline.compactor(), pipeline.projector(batch_size=100)
    half = len(events) // 2
    produce_events(pipeline.bootstrap, pipeline.topics["events"], events[:half])
    target = comp if victim == "compactor" else proj
    wait_until(lambda: len(pipeline.ids()) > 50, 90, "the first rows")
    producing = threading.Thread(
        target=produce_events, args=(pipeline.bootstrap, pipeline.topics["events"], events[half:])
    )
    producing.start()
    target.kill9()
    at_kill = len(pipeline.ids())
    target.start()
    producing.join(60)
    expected = expected_ids(events)
    assert at_kill < len(expected), "the kill must land mid-stream"
    pipeline.wait_rows(expected, 150)
    record.update(check_invariants(pipeline, expected), rows_at_kill=at_kill, events=len(events))
    assert_compacts_identical(pipeline, events)


@pytest.mark.serial  # restarts the Postgres every other test shares
@local_stack_only("restarts the local stack's PostgreSQL (pg_ctl)")
def test_postgres_restart_mid_stream(pipeline: Pipeline, record: dict[str, object]) -> None:
    events = raw_threads(150, prefix="1713")
    pipeline.compactor()
    proj = pipeline.projector(batch_size=100)
    half = len(events) // 2
    produce_events(pipeline.bootstrap, pipeline.topics["events"], events[:half])
    wait_until(lambda: len(pipeline.ids()) > 50, 90, "the first rows")
    producing = threading.Thread(
        target=produce_events, args=(pipeline.bootstrap, pipeline.topics["events"], events[half:])
    )
    producing.start()
    restart_postgres()  # under the stack's lock; it starts Postgres again if the restart failed
    producing.join(60)
    expected = expected_ids(events)
    wait_until(lambda: _ids_or_none(pipeline) is not None, 30, "postgres back")
    pipeline.wait_rows(expected, 150)
    record.update(check_invariants(pipeline, expected))
    assert_compacts_identical(pipeline, events)
    assert proj.alive(), "the projector must survive a Postgres restart"


def _ids_or_none(pipe: Pipeline) -> list[str] | None:
    import psycopg

    try:
        return pipe.ids()
    except psycopg.Error:
        return None
