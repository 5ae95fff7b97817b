"""Long discussions (invariant 10): the deterministic policy that fits the humans' turns to their budget.

Property tests over generated war rooms (deploy/local/warroom.py, any seed and shape): the discussion
as the model is sent it fits its budget; the alert, the trigger and every turn is either shown with the
human's own words or folded and counted, never rewritten; a second plan over the result changes nothing
(what a replay re-derives is what was recorded); the seed thread's few turns are left alone.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.local.warroom import WarRoom, as_rows, generate
from schemas.events import AlertReceived
from schemas.tokens import count_tokens, count_value_tokens
from services.boundary.clip import clip_text
from services.context_render.context import ContextRow, folded, message_tokens, to_messages
from services.context_render.discussion import DiscussionPolicy, plan_discussion, salience, terms

from .seedplay import alert_events, human_events

NOW = datetime(2026, 3, 14, 5, 0, tzinfo=UTC)


def rows_of(room: WarRoom) -> list[ContextRow]:
    return [ContextRow(i, r, None, v, count_value_tokens(v)) for i, r, v in as_rows(room)]


def applied(rows: list[ContextRow], policy: DiscussionPolicy, round_: int = 1) -> list[ContextRow]:
    events = {e.target_id: e for e in plan_discussion(rows, policy, round_, NOW)}
    return [
        replace(r, value=events[r.id].compact, tokens=events[r.id].tokens) if r.id in events else r
        for r in rows
    ]


rooms = st.builds(
    generate,
    seed=st.integers(0, 10_000),
    messages=st.integers(2, 160),
    people=st.integers(1, 20),
    pastes=st.integers(0, 6),
    paste_lines=st.integers(1, 60),
    huge_chars=st.sampled_from([0, 3_000, 12_000]),
    desc_bytes=st.sampled_from([0, 500, 30_000]),
    alerts=st.integers(1, 120),
    facts=st.integers(0, 12),
    mentions=st.integers(0, 5),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(room=rooms, budget=st.integers(1_500, 6_000), recent=st.floats(0.1, 0.9), limit=st.integers(200, 800))
def test_the_discussion_fits_its_budget_and_no_words_are_rewritten(
    room: WarRoom, budget: int, recent: float, limit: int
) -> None:
    assert room.trigger is not None
    rows = rows_of(room)
    policy = DiscussionPolicy(budget, recent, limit, room.trigger.message_id)
    after = applied(rows, policy)
    assert message_tokens(to_messages(after)) <= budget
    original = {r.id: r.value for r in rows}
    for r in after:
        if r.role != "human" or folded(r):
            continue
        own = str(original[r.id]["text"])
        assert r.value["text"] in (own, clip_text(own, limit, r.id))  # verbatim, or head+tail with a pointer
    shown = {r.id for r in after if not folded(r)}
    assert room.trigger.message_id in shown
    assert any(r.role == "alert" for r in after if r.id in shown)
    # replanning the recorded result plans nothing: a replay re-derives exactly what was recorded
    assert plan_discussion(after, policy, 2, NOW) == ()


def test_a_fold_is_counted_by_people_and_time_and_points_at_search() -> None:
    room = generate(7, messages=200, pastes=2, paste_lines=20, huge_chars=0, desc_bytes=0, alerts=3)
    assert room.trigger is not None
    after = applied(rows_of(room), DiscussionPolicy(2_000, 0.3, 600, room.trigger.message_id))
    folds = [m.content for m in to_messages(after) if str(m.content).startswith("[")]
    hidden = [r for r in after if folded(r)]
    assert hidden, "a 200-message room over a 2,000-token budget folds something"
    counted = sum(int(str(f).split()[0][1:]) for f in folds if "more message" in str(f))
    assert counted == len(hidden)  # every left-out turn is counted, none twice
    assert all(
        "search_thread(query)" in str(f) and "UTC" in str(f) for f in folds if "more message" in str(f)
    )


def test_an_alert_group_is_its_count_and_its_varying_labels_never_alert_by_alert() -> None:
    room = generate(3, messages=2, alerts=500, desc_bytes=400_000, huge_chars=0, pastes=0, facts=0)
    assert room.trigger is not None
    after = applied(rows_of(room), DiscussionPolicy(3_600, 0.4, 600, room.trigger.message_id))
    alert = to_messages(after)[0].content
    assert isinstance(alert, str)
    assert "group of 500 alerts" in alert and "pod (500:" in alert and "+492 more" in alert
    assert (
        "get_evidence(" in alert and "characters (" in alert and "lines) not shown" in alert
    )  # the description: head, tail, pointer
    assert count_tokens(alert) <= 800


def test_salience_is_a_decision_or_a_term_shared_with_the_evidence() -> None:
    evidence = terms('{"pattern":"upstream timeout checkout-api","first":"03:41:07","count":198}')
    say = lambda text: ContextRow("T:-:human:1", "human", None, {"text": text, "user": "U1"}, 1)  # noqa: E731
    assert salience(say("we rolled back checkout-api"), evidence) == 3 + 1
    assert salience(say("I count 198 of them"), evidence) == 1
    assert salience(say("coffee anyone?"), evidence) == 0


def test_the_seed_threads_turns_are_left_alone() -> None:
    events = [*alert_events(), *human_events(mention=False), *human_events(mention=True)]
    rows = [
        ContextRow(
            e.message_id, "alert" if isinstance(e, AlertReceived) else "human", None, v, count_value_tokens(v)
        )
        for e in events
        for v in [
            e.model_dump(
                mode="json",
                include={
                    "status",
                    "service",
                    "alertname",
                    "fingerprint",
                    "window_start",
                    "window_end",
                    "alert",
                },
            )
            if isinstance(e, AlertReceived)
            else {"user": e.user, "ts": e.ts, "text": e.text, "mention": e.mention, "edit_of": None}  # type: ignore[attr-defined]
        ]
    ]
    assert plan_discussion(rows, DiscussionPolicy(3_600, 0.4, 600, rows[-1].id), 2, NOW) == ()
