"""The round's graph as a class (issue 35): its nodes are documented methods, the post's words are pure.

The graph's behaviour end to end is held by test_seed_thread, test_openai_wire and test_hostile_model;
these check the structure a newcomer reads, without a model or Kafka.
"""

from __future__ import annotations

import inspect

from schemas.events import ToolCall
from services.agent.graph import RoundGraph, post_text
from services.agent.round_state import ClaimDraft, RoundState

NODES = ("investigate", "tools", "hypothesis", "judge", "post")


def test_every_node_is_a_method_that_says_why() -> None:
    for name in (*NODES, "after_investigate", "emit_ai", "ask"):
        method = getattr(RoundGraph, name)
        assert inspect.getdoc(method), f"RoundGraph.{name} has no docstring"
    for name in NODES:
        assert inspect.iscoroutinefunction(getattr(RoundGraph, name)), name


def test_the_loop_goes_to_tools_while_calls_are_pending() -> None:
    assert RoundGraph.after_investigate({"pending": []}) == "hypothesis"
    assert RoundGraph.after_investigate({}) == "hypothesis"
    pending = [ToolCall(id="T:1:c", name="query_loki", args={})]
    assert RoundGraph.after_investigate({"pending": pending}) == "tools"


def _state(**extra: object) -> RoundState:
    claims = [ClaimDraft(text="heap grew", evidence_ids=["T:1:tools:0"])]
    state: RoundState = {
        "hypothesis": {"summary": "OOM", "claims": claims},
        "hypothesis_id": "T:1:hypothesis:0",
    }
    state.update(extra)  # type: ignore[typeddict-item]
    return state


def test_a_grounded_verdict_posts_the_summary_and_names_the_hypothesis_once() -> None:
    state = _state(verdict={"grounded": True, "questions": [], "graded_claims": []})
    assert post_text(state) == ("summary", "OOM\n• heap grew\nevidence: T:1:hypothesis:0")


def test_an_ungrounded_verdict_posts_its_questions_or_asks_what_else() -> None:
    asked = _state(verdict={"grounded": False, "questions": ["which pod?"], "graded_claims": []})
    assert post_text(asked) == ("questions", "Before I conclude, I need answers to:\n1. which pod?")
    silent = _state(verdict={"grounded": False, "questions": [], "graded_claims": []})
    assert post_text(silent)[1].endswith("1. What else should I look at?")


def test_a_failed_verdict_posts_the_failure() -> None:
    state = _state(
        verdict={"grounded": False, "questions": [], "graded_claims": [], "failure": "no JSON"},
        hypothesis_failure="no JSON",
    )
    kind, text = post_text(state)
    assert kind == "failure" and "T:1:hypothesis:0" in text
