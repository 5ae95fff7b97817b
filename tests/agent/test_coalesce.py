"""Wakes coalesced (issue 34): the pure policy (services/agent/coalesce.py), the post that names whom it
answers, and the agent's gathering of a thread's wakes into one round (with run_round replaced)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import AnsweredMention, ThreadPost, Wake
from services.agent import main as agent_main
from services.agent.coalesce import Mention, answered, ready_at, unanswered, wake_done
from services.agent.config import AgentConfig
from services.agent.round import RoundResult
from services.context_render.context import ContextRow, answer_ids
from services.projector.mapping import Row, map_event
from services.runtime.kafka_client import KafkaClient
from services.voice.blocks import answering, post_blocks

T = "1773458070.000100"
NOW = datetime(2026, 3, 14, 4, 30, tzinfo=UTC)


def mention(i: int, user: str = "U01ALICE") -> ContextRow:
    return ContextRow(
        f"{T}:-:human:{i}", "human", None, {"user": user, "text": "<@U0BOT> ?", "mention": True}, 5
    )


def chat(i: int) -> ContextRow:
    return ContextRow(
        f"{T}:-:human:{i}", "human", None, {"user": "U02BOB", "text": "hm", "mention": False}, 2
    )


def round_rows(r: int, answers: list[str] | None) -> list[ContextRow]:
    """A committed round as the agent loads it: an ai turn, then its post (with its recorded answers)."""
    post = {"kind": "summary", "text": "done", "model": "m"}
    ans = None if answers is None else tuple(answers)
    return [
        ContextRow(f"{T}:{r}:hypothesis:0", "ai", None, {"text": "h"}, 3),
        ContextRow(f"{T}:{r}:post:0", "post", None, post, 3, ans),
    ]


ALERT = ContextRow(f"{T}:-:alert:0", "alert", None, {"alertname": "A"}, 10)


def test_a_mention_recorded_while_a_round_ran_is_answered_by_the_next_round() -> None:
    # Round 1 loaded [alert, m1] and answered m1; m2 was projected while it ran, so its seq comes
    # before round 1's rows. The old rule ("a committed ai row follows the trigger") skipped m2.
    rows = [ALERT, mention(1), mention(2, "U02BOB"), *round_rows(1, [mention(1).id])]
    assert wake_done(rows, "mention", mention(1).id)
    assert not wake_done(rows, "mention", mention(2).id)
    assert unanswered(rows) == [Mention(mention(2).id, "U02BOB")]


def test_one_round_answers_every_mention_it_loads_and_their_wakes_are_then_done() -> None:
    ten = [mention(i, f"U0{i % 3}PERSON") for i in range(1, 11)]
    rows = [ALERT, chat(0), *ten]
    assert [m.message_id for m in unanswered(rows)] == [m.id for m in ten]
    after = [*rows, *round_rows(1, [m.id for m in ten])]
    assert all(wake_done(after, "mention", m.id) for m in ten)
    assert unanswered(after) == []
    later = [*after, mention(11)]
    assert unanswered(later) == [Mention(mention(11).id, "U01ALICE")]


def test_a_post_recorded_before_posts_named_them_answered_every_mention_above_it() -> None:
    rows = [ALERT, mention(1), *round_rows(1, None), mention(2)]
    assert answered(rows) == {mention(1).id}
    assert [m.message_id for m in unanswered(rows)] == [mention(2).id]


def test_an_alert_round_with_no_mention_answers_none_above_it() -> None:
    # Recorded as an empty list, not None: the mention that came in while it ran stays unanswered.
    rows = [ALERT, mention(1), *round_rows(1, [])]
    assert not wake_done(rows, "mention", mention(1).id)
    assert wake_done(rows, "alert", ALERT.id)
    assert not wake_done([ALERT, mention(1)], "alert", ALERT.id)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int]]:
    """A thread's arrivals: ("m", n) a mention; ("r", k) a round that loads the thread, and k mentions
    arrive while it runs (projected before its rows)."""
    steps = draw(
        st.lists(st.one_of(st.just(("m", 0)), st.tuples(st.just("r"), st.integers(0, 3))), max_size=25)
    )
    return [*steps, ("r", 0)]


@settings(max_examples=200, deadline=None)
@given(histories())
def test_every_mention_is_answered_exactly_once_by_the_first_round_that_saw_it(
    steps: list[tuple[str, int]],
) -> None:
    rows: list[ContextRow] = [ALERT]
    seen_by: dict[str, int] = {}
    posts: list[tuple[str, ...]] = []
    n = 0
    for kind, during in steps:
        if kind == "m":
            n += 1
            rows.append(mention(n))
            continue
        loaded = list(rows)
        answers = [m.message_id for m in unanswered(loaded)]
        assert answers == [m.message_id for m in unanswered(list(loaded))]  # a rerun answers the same
        for mid in answers:
            seen_by.setdefault(mid, len(posts) + 1)
        for _ in range(during):
            n += 1
            rows.append(mention(n))
        rows.extend(round_rows(len(posts) + 1, answers))
        posts.append(tuple(answers))
    everyone = [r.id for r in rows if r.role == "human"]
    flat = [mid for p in posts for mid in p]
    assert sorted(flat) == sorted(everyone)  # each mention answered exactly once
    assert all(mid in posts[seen_by[mid] - 1] for mid in everyone)
    assert all(wake_done(rows, "mention", mid) for mid in everyone)


def test_ready_at_waits_for_quiet_but_never_past_the_longest_wait() -> None:
    assert ready_at(first=0.0, latest=0.0, window=2.0, longest=15.0) == 2.0
    assert ready_at(first=0.0, latest=9.0, window=2.0, longest=15.0) == 11.0
    assert ready_at(first=0.0, latest=14.5, window=2.0, longest=15.0) == 15.0
    assert ready_at(first=5.0, latest=5.0, window=0.0, longest=0.0) == 5.0


# --- the post: recorded answers, hidden from the model, named in Slack ------------------------------------


def _post(answers: list[AnsweredMention] | None) -> ThreadPost:
    return ThreadPost(thread_ts=T, message_id=f"{T}:2:post:0", event_time=NOW, round=2, kind="summary",
                      text="OOM in checkout\n• heap 512Mi", model="m", answers=answers)  # fmt: skip


def _row(post: ThreadPost) -> Any:
    (row,) = [o for o in map_event(post) if isinstance(o, Row)]
    return row


def test_the_post_row_keeps_its_answers_in_the_raw_and_the_model_sees_the_post_as_before() -> None:
    answers = [AnsweredMention(message_id=mention(1).id, user="U01ALICE")]
    before, after = _row(_post(None)), _row(_post(answers))
    assert json.loads(after.compact) == json.loads(before.content)
    assert after.tokens == before.tokens
    assert answer_ids(json.loads(after.content)["answers"]) == (mention(1).id,)
    assert answer_ids(None) is None
    assert b'"answers"' not in _post(None).to_bytes()  # old posts keep their bytes


def test_the_post_names_each_person_it_answers_once_and_nothing_else_forms_markup() -> None:
    people = ["U01ALICE", "U02BOB", "U01ALICE", "<!channel>"]
    post = _post([AnsweredMention(message_id=mention(i).id, user=u) for i, u in enumerate(people)])
    assert answering(post) == "<@U01ALICE> <@U02BOB> @&lt;!channel&gt;: "
    text, blocks = post_blocks(post)
    assert text.startswith("<@U01ALICE> <@U02BOB> @&lt;!channel&gt;: Summary: OOM in checkout")
    assert blocks[0]["text"]["text"].startswith("<@U01ALICE> <@U02BOB>")
    assert answering(_post(None)) == "" and answering(_post([])) == ""


# --- the agent's gathering: one round for a burst of wakes ------------------------------------------------


def _wake(i: int) -> Wake:
    return Wake(thread_ts=T, message_id=f"{T}:-:wake:{i}", event_time=NOW, reason="mention",
                trigger_message_id=mention(i).id, user="U01ALICE")  # fmt: skip


def _service(window: float, longest: float) -> agent_main.AgentService:
    service = agent_main.AgentService.__new__(agent_main.AgentService)
    service.config = AgentConfig(
        kafka=KafkaClient.plaintext("unused:9092"),
        database_url="postgresql://unused",
        wake_window=window,
        wake_window_max=longest,
    )
    service.results, service._locks, service._gathering = [], {}, {}
    service.toolbox = object()  # type: ignore[assignment]
    service.models = service.emitter = None  # type: ignore[assignment]
    return service


def test_a_burst_of_wakes_gives_one_round_for_the_latest_and_every_wake_is_done(monkeypatch: Any) -> None:
    started: list[Wake] = []

    async def fake_round(wake: Wake, *_: Any) -> RoundResult:
        started.append(wake)
        await asyncio.sleep(0.05)
        return RoundResult(wake.thread_ts, 1, "committed")

    monkeypatch.setattr(agent_main, "run_round", fake_round)
    service = _service(window=0.3, longest=5.0)

    async def burst() -> list[bool]:
        service._sem = asyncio.Semaphore(2)
        tasks = []
        for i in range(1, 11):
            tasks.append(asyncio.create_task(service.handle(_wake(i))))
            await asyncio.sleep(0.01)
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(burst()) == [True] * 10
    assert [w.message_id for w in started] == [_wake(10).message_id]
    assert service._gathering == {}


def test_without_a_window_each_wake_that_finds_no_round_runs_its_own(monkeypatch: Any) -> None:
    started: list[Wake] = []

    async def fake_round(wake: Wake, *_: Any) -> RoundResult:
        started.append(wake)
        return RoundResult(wake.thread_ts, 1, "committed")

    monkeypatch.setattr(agent_main, "run_round", fake_round)
    service = _service(window=0.0, longest=0.0)

    async def one_by_one() -> None:
        service._sem = asyncio.Semaphore(2)
        for i in (1, 2):
            assert await service.handle(_wake(i))

    asyncio.run(one_by_one())
    assert [w.message_id for w in started] == [_wake(1).message_id, _wake(2).message_id]
