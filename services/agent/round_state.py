"""The typed state of one round's graph, and the dependencies the graph is built with.

LangGraph merges each node's returned dict into the state key by key, so every key a node may
return is declared here: a node that returns a misspelled key or a wrong type fails mypy, not a
thread in production.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from schemas.events import AnsweredMention, MadeFor, RecalledIncident, ToolCall
from schemas.ids import message_id
from services.agent.config import AgentConfig
from services.agent.mcp_client import McpToolbox
from services.agent.playbooks import PlaybookPlan
from services.agent.toolpath import ToolPath
from services.context_render.context import LoadedContext
from services.runtime.emitter import EventEmitter


class ClaimDraft(TypedDict):
    """A claim as the judge is shown it: its words and the evidence ids it cites."""

    text: str
    evidence_ids: list[str]


class HypothesisDraft(TypedDict):
    """The hypothesis node's output as the judge and the post read it (empty claims when it failed)."""

    summary: str
    claims: list[ClaimDraft]


class VerdictDraft(TypedDict):
    """The judge node's output as the post reads it; `failure` only when no grade could be had."""

    grounded: bool
    questions: list[str]
    graded_claims: list[dict[str, Any]]
    failure: NotRequired[str | None]


class RoundState(TypedDict, total=False):
    """The graph's state: what the nodes pass each other within one round."""

    turn: list[BaseMessage]  # this round's model-visible messages, in order
    emitted: list[str]  # this round's message ids, in order (the marker's list)
    investigate_i: int  # the next investigate turn's index (its message id's last part)
    tool_i: int  # the next tool result's index
    pending: list[ToolCall]  # the calls the last investigate turn asked for, not yet run
    hypothesis: HypothesisDraft
    hypothesis_id: str
    hypothesis_failure: str  # set when the hypothesis answer could not be used
    verdict: VerdictDraft


class Envelope(TypedDict):
    """What every event a node emits carries: its thread, its deterministic id, its round, when."""

    thread_ts: str
    message_id: str
    event_time: datetime
    round: int


RawReader = Callable[[str], Awaitable[Any]]
"""async (evidence_id) -> the raw a claim cites, redacted; the judge checks numbers against it."""


@dataclass
class RoundDeps:
    """Everything one round's graph needs from outside: built by run_round, one per round."""

    config: AgentConfig
    ctx: LoadedContext
    round: int
    preamble: str
    agent_model: BaseChatModel
    judge_model: BaseChatModel
    agent_model_name: str
    judge_model_name: str
    toolbox: McpToolbox
    tools: ToolPath
    emitter: EventEmitter
    raw_reader: RawReader
    model_inputs: list[tuple[str, int]] = field(default_factory=list)
    playbook: PlaybookPlan | None = None  # an alert's deterministic first calls (services/agent/playbooks.py)
    answers: tuple[AnsweredMention, ...] = ()  # the mentions the post answers (services/agent/coalesce.py)
    # An alert's first round recalls other incidents once (services/agent/recall_step.py); None otherwise.
    recall: Callable[[MadeFor], Awaitable[list[RecalledIncident]]] | None = None
    recalled: list[RecalledIncident] | None = None

    @property
    def thread_ts(self) -> str:
        return self.ctx.thread_ts

    def mid(self, node: str, i: int) -> str:
        return message_id(self.thread_ts, self.round, node, i)

    def envelope(self, node: str, i: int) -> Envelope:
        """The `i`-th event of `node` in this round, stamped now: `Event(**deps.envelope(...), ...)`."""
        return Envelope(
            thread_ts=self.thread_ts,
            message_id=self.mid(node, i),
            event_time=datetime.now(UTC),
            round=self.round,
        )
