"""The seed post's promise, computed exactly: every round-2 model input under 2,500 tokens, tool
schemas included, and the finished thread's context under 2,500 while its raw is over 40,000.

The thread is played in one process (tests/agent/inprocess.py: the agent's graph, the compactor's
compaction, the projector's mapping, the telemetry MCP server over stdio), so these figures are
the ones the real stack produces (tests/agent/test_seed_thread.py checks them there too).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from schemas.row_view import model_view
from schemas.tokens import count_tokens, render_for_model
from services.agent.config import EVIDENCE_TOOL
from services.agent.mcp_client import McpToolbox
from services.context_render.context import message_tokens

from .inprocess import Seeded, telemetry_server
from .seedplay import mention_wake

LIMIT = 2500
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def seeded() -> tuple[Seeded, int]:
    """The seed thread after both rounds, and the tokens of the tool schemas the agent sends."""

    async def play() -> tuple[Seeded, int]:
        thread = Seeded()
        async with McpToolbox((telemetry_server(),)) as toolbox:
            await thread.play_seed(toolbox)
            schemas = count_tokens(render_for_model(toolbox.tool_specs(exclude=(EVIDENCE_TOOL,))))
        return thread, schemas

    return asyncio.run(play())


def test_every_round_2_model_input_is_under_2500_tokens_with_the_tool_schemas(
    seeded: tuple[Seeded, int],
) -> None:
    thread, schemas = seeded
    calls = [(node, tokens) for round_, node, tokens in thread.calls if round_ == 2]
    print(f"round-2 model inputs (tool schemas {schemas} on investigate): {calls}")
    assert [node for node, _ in calls] == ["investigate", "investigate", "hypothesis", "judge"]
    assert schemas > 200  # the telemetry tools (search_thread too) are really sent, and counted
    assert max(tokens for _, tokens in calls) < LIMIT, calls


def test_the_recorded_input_is_the_messages_plus_the_schemas(seeded: tuple[Seeded, int]) -> None:
    """`model_inputs` is not trusted blindly: rebuild round 2's first call and count it here."""
    from datetime import UTC, datetime

    from langchain_core.messages import SystemMessage

    from services.context_render import prompts
    from services.context_render.context import to_messages
    from services.context_render.preamble import Trigger, render_preamble

    thread, schemas = seeded
    ctx = thread.projection.context(mention_wake().thread_ts)
    before_round_2 = type(ctx)(ctx.thread_ts, tuple(r for r in ctx.rows if r.round != 2), ctx.state)
    wake = mention_wake()
    preamble = render_preamble(
        before_round_2, 2, Trigger(wake.reason, wake.trigger_message_id, wake.user), datetime.now(UTC)
    )
    messages = [
        SystemMessage(content=f"{preamble}\n\n{prompts.INVESTIGATE}"),
        *to_messages(before_round_2.rows),
    ]
    first = next(tokens for round_, node, tokens in thread.calls if round_ == 2 and node == "investigate")
    # the clock in "began Xh Ym ago" may tick over between the two renderings: a token at most
    assert abs(first - (message_tokens(messages) + schemas)) <= 1


def test_the_finished_thread_shows_raw_over_40000_and_context_under_2500(seeded: tuple[Seeded, int]) -> None:
    thread, _ = seeded
    shown = thread.projection.shown()
    assert [r.role for r in shown] == (
        ["alert", "ai", "tool", "tool", "tool", "ai", "ai", "judge", "post"]
        + ["human"] * 5
        + ["ai", "tool", "ai", "ai", "judge", "post"]
    )
    raw = sum(r.raw_tokens for r in shown)
    context = sum(r.context_tokens for r in shown)
    print(f"raw {raw}, in context {context}: {[(r.seq, r.what, r.context_tokens) for r in shown]}")
    assert raw > 40_000
    assert context < LIMIT, [(r.seq, r.what, r.context_tokens) for r in shown]
    # never compacted: the alert, the humans, the judge's rejection
    rejection = next(r for r in thread.projection.rows if r.role == "judge" and r.round == 1)
    untouched = [r for r in thread.projection.rows if r.role in ("alert", "human")] + [rejection]
    # (a row written with bookkeeping beside its words has compact = the content without it: the same words)
    assert all(
        r.compact is None or json.loads(r.compact) == model_view(json.loads(r.content)) for r in untouched
    )
    # the previous round was cut to headlines, each with its evidence id
    cut = [r for r in thread.projection.rows if r.round == 1 and r.compact and "re_rendered" in r.compact]
    assert {r.role for r in cut} == {"ai", "tool", "post"}
    assert all(r.compact is not None and r.id in r.compact for r in cut)
