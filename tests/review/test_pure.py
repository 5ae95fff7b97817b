"""The review page's pure parts: pattern words and line assignment, links, bars, silence."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.review import model, patterns, pod_events
from services.review.model import ThreadRow


def test_fixed_words_drop_times_counts_digits_clip_and_the_added_level_tag() -> None:
    item = "03:12:44–03:14:01 ERROR connection reset by peer conn=812 [conn=1..900]"
    assert patterns.fixed_words(item) == ["connection", "reset", "by", "peer", "conn"]
    clipped = "2026-03-14 03:12:44 upstream timed out while reading respo…(+120 chars)"
    assert patterns.fixed_words(clipped) == ["upstream", "timed", "out", "while", "reading"]
    assert patterns.fixed_words("GC pause took *ms on pod-*") == ["GC", "pause", "took", "on"]


def test_loki_patterns_read_the_stated_counts() -> None:
    compact = {"patterns": ["198× 03:00:01–03:01:17 ERROR OOMKilled container app", "2× started"], "x": 1}
    found = patterns.loki_patterns(compact)
    assert [(p["index"], p["count"], p["words"]) for p in found] == [
        (0, 198, ["OOMKilled", "container", "app"]),
        (1, 2, ["started"]),
    ]
    assert patterns.loki_patterns({"summary": "0 lines"}) == [] == patterns.loki_patterns("text")


def test_each_line_goes_to_its_most_specific_pattern_once() -> None:
    pats: list[dict[str, Any]] = [
        {"words": ["connection", "reset"]},
        {"words": ["connection", "reset", "by", "peer"]},
        {"words": []},
    ]
    lines = [
        "a connection reset by peer x=1",
        "connection reset",
        "reset: connection",
        "connection",
        "nothing",
    ]
    assert patterns.assign(lines, pats) == [1, 0, 0, None, None]


def test_a_key_value_word_matches_the_same_field_in_a_json_line() -> None:
    words = patterns.fixed_words("request completed req.method=POST res.statusCode=200")
    assert words == ["request", "completed", "method", "POST", "statusCode"]
    line = '{"msg":"request completed","req":{"method":"POST"},"res":{"statusCode":200}}'
    assert patterns.assign(
        [line, '{"msg":"request completed","req":{"method":"GET"}}'], [{"words": words}]
    ) == [
        0,
        None,
    ]


def test_slack_links_only_for_slacks_own_shapes() -> None:
    assert model.slack_link("C0INCIDENT", "1710385200.000100") == (
        "https://slack.com/archives/C0INCIDENT/p1710385200000100"
    )
    for channel, ts in (("javascript:alert(1)", "1.2"), ("C0", "javascript:x"), (None, "1.2"), ("C0", None)):
        assert model.slack_link(channel, ts) is None


def test_bars_are_log_scaled_so_small_rows_stay_visible() -> None:
    assert model.bar(21504, 21504) == model.BAR_WIDTH
    assert 0 < model.bar(56, 21504) < model.BAR_WIDTH // 2
    assert model.bar(0, 100) == 0


def _row(
    role: str, round_: int | None, content: object, compact: object = None, first: object = None
) -> ThreadRow:
    return ThreadRow(1, round_, role, "T:-:x:0", None, content, compact, 5, datetime(2026, 1, 1, tzinfo=UTC),
                     "query_loki" if role == "tool" else None, first, 9 if first is not None else None)  # fmt: skip


def test_silent_rows_are_human_turns_outside_rounds_that_did_not_mention_the_bot() -> None:
    assert model.silent(_row("human", None, {"text": "hm", "mention": False}))
    assert not model.silent(_row("human", None, {"text": "@bot?", "mention": True}))
    assert not model.silent(_row("ai", 1, {"text": "x"}))


def test_a_re_rendered_tool_row_shows_its_written_digest_then_its_current_one() -> None:
    first = {"patterns": ["198× OOMKilled"]}
    now = {"re_rendered": "headline", "headline": "query_loki: 198× OOMKilled"}
    shown = model.renderings(_row("tool", 1, None, now, first))
    assert [(r["label"], r["tokens"]) for r in shown] == [("written", 9), ("re-rendered", 5)]
    assert model.renderings(_row("tool", 1, None, first, first))[0]["label"] == "written"
    assert model.renderings(_row("human", None, {"text": "x"}))[0]["label"] == "raw (no compact)"


def test_an_ai_row_written_with_its_calls_record_shows_the_models_view_as_written() -> None:
    """A row's `sent` (what its calls were sent, issue 38) is kept beside the model's view, never shown
    as what the model saw; one without it was written as the raw."""
    view = {"node": "hypothesis", "text": "OOM", "claims": [], "tool_calls": [], "model": "m"}
    headline = {"re_rendered": "headline", "headline": "OOM"}
    history = [(2, "headline", headline, 4)]
    recorded = _row("ai", 1, {**view, "sent": [{"tools": []}]}, headline)
    shown = model.renderings(recorded, history)
    assert [r["label"] for r in shown] == ["written", "headline, for round 2"] and shown[0]["value"] == view
    older = model.renderings(_row("ai", 1, view, headline), history)
    assert older[0]["label"] == "written (the raw)" and older[0]["value"] == view


def test_pod_event_groups_read_type_reason_and_the_summed_count() -> None:
    found = pod_events.groups(
        {"events": ["27× 03:11:00–03:12:30 Warning Unhealthy 1 pod", "3× Created 1 pod"]}
    )
    assert [(g["count"], g["type"], g["reason"]) for g in found] == [
        (27, "Warning", "Unhealthy"),
        (3, "Normal", "Created"),
    ]
    assert pod_events.groups({"summary": "0 events"}) == []


def test_the_streams_a_pattern_came_from_are_not_words_of_its_lines() -> None:
    item = "03:12:44–03:14:01 [2 of 4 pods: checkout-api-7d9f8b6c5-{m8p3z,x2k4q}] FATAL ERROR: JS heap out of memory"
    assert patterns.fixed_words(item) == ["ERROR:", "JS", "heap", "out", "of", "memory"]
    assert patterns.fixed_words("03:00:11 ERROR [app=checkout-api] GET /healthz") == ["GET", "/healthz"]
