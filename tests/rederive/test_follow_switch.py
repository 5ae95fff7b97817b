"""Where a writer given `--follow-switch` writes (`services.runtime.follow_switch.place`, pure)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from schemas.projections import Writers
from services.runtime import follow_switch
from services.runtime.follow_switch import Placement, SwitchFollower, place

V7 = Writers(
    schema="v7",
    events_topic="incident.events",
    compacted_topic="incident.compacted.v7",
    dlq_topic="incident.dlq.v7",
    compactor_app_id="incident-memory-compactor-rederive-v7",
    projector_group="incident-memory-projector-rederive-v7",
)


def test_before_any_switch_and_on_the_base_it_writes_its_own_arguments() -> None:
    assert place(None, "public", None, "incident.events").writers is None
    assert place("public", "public", None, "incident.events").writers is None
    assert place("public", "public", None, "incident.events").note is None


def test_a_rederived_projection_is_written_by_its_run_records_names() -> None:
    assert place("v7", "public", V7, "incident.events").writers == V7
    assert place("v7", "public", V7, None).writers == V7  # a projector does not check the events topic


def test_a_projection_no_rederive_made_or_from_another_topic_keeps_the_base_and_says_why() -> None:
    replayed = place("replay_x", "public", None, "incident.events")
    assert replayed.writers is None and replayed.note is not None and "no re-derivation made" in replayed.note
    other = place("v7", "public", V7, "other.events")
    assert other.writers is None and other.note is not None and "other.events" in other.note


def test_a_reason_to_stay_on_the_base_is_warned_once_not_at_every_poll(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    note = "readers see 'replay_x', which no re-derivation made: writing the base 'public'"
    stuck = Placement("replay_x", None, note)

    class Stuck(SwitchFollower):
        def resolve(self) -> Placement:
            return stuck

    monkeypatch.setattr(follow_switch, "POLL_SECONDS", 0.01)
    stop = threading.Event()
    with caplog.at_level(logging.WARNING, logger="incident_memory.follow_switch"):
        moved = Stuck("dsn", "live", "public", None, "projector").watch(Placement(None, None), stop.set, stop)
        time.sleep(0.3)  # about 30 polls
        stop.set()
    assert not moved.is_set()  # the writers did not change: no move
    assert [r.getMessage() for r in caplog.records] == [note]
