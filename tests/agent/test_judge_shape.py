"""The judge's input shaped within the input budget (issue 34 part 3; services/context_render/judge_shape.py):
on generated war rooms a hypothesis citing many long turns and digests still gives a judge call within
budget, the hypothesis and raw checks untouched, every cited id shown, clipped with a pointer, or named."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.warroom import as_rows, generate
from services.context_render.judge_shape import judge_input_tokens, shape_judge_payload

BUDGET = 8000
ROOM = generate(seed=34, messages=300, people=12, pastes=10, paste_lines=150)
HUMANS = [(rid, v) for rid, role, v in as_rows(ROOM) if role == "human"]


def payload_citing(ids: list[tuple[str, dict[str, Any]]], claims: int) -> dict[str, Any]:
    evidence = {rid: {"kind": "human", "digest": {"user": v["user"], "text": v["text"]}} for rid, v in ids}
    cited = list(evidence)
    return {
        "hypothesis_id": "T:3:hypothesis:0",
        "service": "checkout",
        "summary": "checkout pods OOM after the 14.2 deploy",
        "claims": [{"text": f"claim {k}", "evidence_ids": cited[k::claims]} for k in range(claims)],
        "evidence": evidence,
        "raw_checks": [{"claim": k, "missing": []} for k in range(claims)],
    }


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(1, 6), st.sampled_from([4000, BUDGET]))
def test_the_judge_input_fits_and_nothing_judged_is_cut(
    seed: int, cited: int, claims: int, budget: int
) -> None:
    rng = random.Random(seed)
    payload = payload_citing(rng.sample(HUMANS, min(cited, len(HUMANS))), claims)
    shaped = shape_judge_payload(payload, budget, judge_input_tokens)
    if (
        judge_input_tokens({**payload, "evidence": {}, "evidence_not_shown": list(payload["evidence"])})
        > budget
    ):
        assert shaped["evidence"] == {}  # the hypothesis alone is over: the call's guard reports it
        return
    assert judge_input_tokens(shaped) <= budget
    for key in ("hypothesis_id", "summary", "claims", "raw_checks", "service"):
        assert shaped[key] == payload[key]
    shown, left = shaped["evidence"], shaped.get("evidence_not_shown", [])
    assert list(shown) + left == list(payload["evidence"])  # every cited id: shown or named, in order
    for rid, entry in shown.items():
        whole = payload["evidence"][rid]["digest"]["text"]
        text = entry["digest"]["text"]
        assert text == whole or f"get_evidence({rid}) reads it whole" in text
    if judge_input_tokens(payload) <= budget:
        assert shaped == payload  # within budget: sent as it is


def test_a_war_room_hypothesis_citing_its_longest_turns_is_clipped_not_dropped() -> None:
    longest = sorted(HUMANS, key=lambda h: -len(h[1]["text"]))[:8]
    payload = payload_citing(longest, 2)
    assert judge_input_tokens(payload) > BUDGET  # the case this exists for
    shaped = shape_judge_payload(payload, BUDGET, judge_input_tokens)
    assert judge_input_tokens(shaped) <= BUDGET
    assert "evidence_not_shown" not in shaped and len(shaped["evidence"]) == 8
