"""Where a writer given `--follow-switch` writes (`services.runtime.follow_switch.place`, pure)."""

from __future__ import annotations

from schemas.projections import Writers
from services.runtime.follow_switch import place

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
