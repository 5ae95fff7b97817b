"""The agent's configuration: where its MCP servers are, which compactor each tool feeds, its models.

Loaded from an optional JSON file plus command-line overrides. Which compactor a tool feeds is
not configured here: it is the one tool map the compactor reads too (`schemas/tools.py`, extended
by `COMPACTOR_TOOL_MAP`), so a user who plugs in another MCP server (Grafana's, say) maps its
tools once and keeps write-time compaction: the raw goes out under the compactor's name.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas import topics
from schemas.tools import TOOL_MAP_ENV, ToolMapError, tool_map
from services.boundary.scope import ScopePolicy
from services.runtime.errors import UserFacingError
from services.runtime.kafka_client import KafkaClient
from services.runtime.loading import json_object_setting
from services.runtime.scope_setting import SCOPE_ENV, policy_from_env
from services.runtime.telemetry_settings import (
    IN_CLUSTER_HOST_ENV,
    IN_CLUSTER_PORT_ENV,
    PROJECTION_KEYS,
    SETTINGS_ENV,
)

INPUT_BUDGET_FLOOR = 2000  # below this the preamble, prompts and tool schemas alone may not fit
EVIDENCE_TOOL = "get_evidence"  # reads a raw back; never a telemetry query, never compacted


def default_cli() -> str:
    """The production `incident-memory-service` script next to this interpreter (the venv's, the image's);
    else the dev install's `incident-memory` there (a venv made before the split: it serves the same
    subcommands); else whatever is on PATH."""
    for name in ("incident-memory-service", "incident-memory"):
        beside = Path(sys.executable).parent / name
        if beside.exists():
            return str(beside)
    return shutil.which("incident-memory-service") or "incident-memory-service"


@dataclass(frozen=True)
class McpServer:
    """One MCP server: a stdio command (spawned by the agent) or a streamable-HTTP url."""

    name: str
    command: list[str] = field(default_factory=list)
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # Variables of the agent's own environment a stdio server may read, by name; beyond these and
    # BASE_ENV it inherits nothing (not the model key, not the Kafka or Postgres passwords).
    pass_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.command and not self.url:
            raise UserFacingError(f"MCP server {self.name!r} needs a command or a url")


@dataclass(frozen=True)
class ModelConfig:
    """`local` is the deterministic offline model; anything else is a ChatOpenAI model name."""

    agent: str = "local"
    judge: str = "local"
    temperature: float = 0.0
    # Every call is capped: a small model can generate until its context ends (docs/models.md).
    max_tokens: int = 1024


@dataclass(frozen=True)
class AgentConfig:
    kafka: KafkaClient  # bootstrap + security (services.runtime.kafka_client)
    database_url: str
    schema: str = "public"
    events_topic: str = topics.EVENTS
    wake_topic: str = topics.WAKE
    group_id: str = "incident-memory-agent"
    mcp_servers: tuple[McpServer, ...] = ()
    tool_compactors: Mapping[str, str] = field(default_factory=tool_map)  # read-only; see tools_from_env
    models: ModelConfig = field(default_factory=ModelConfig)
    # Tokens of a thread's rows (its running sum, what `show` totals) above which old rows are
    # re-rendered before a round. A round's model input adds the preamble, the node's prompt, the
    # tool schemas and the round's own turn (~1,000 in the seed's round 2), so 1,200 keeps every
    # round-2 call of the seed thread under 2,500 tokens; see docs/context-budget.md.
    context_budget: int = 1200
    # The hard limit on one model call's whole input (preamble, messages, tool schemas), in tokens:
    # `input_budgets` per model name, `input_budget` for any other. Going over raises
    # InputBudgetExceeded before the call (services/context_render/input_budget.py; docs/context-budget.md).
    input_budget: int = 8000
    input_budgets: Mapping[str, int] = field(default_factory=dict)
    # Of the input budget, the share for the alert and the humans' turns as the model is sent them
    # (services/context_render/discussion.py), and of that share the part for the most recent messages, whole.
    discussion_share: float = 0.45
    recent_share: float = 0.4
    # A single human turn or alert annotation above this many tokens shows head and tail, with a pointer.
    turn_limit: int = 600
    # The most one tool result adds to a round's input (the largest compactor budget, with its evidence
    # id): the investigate loop runs a call only when that much room is left under the input budget.
    tool_result_tokens: int = 420
    max_concurrency: int = 4  # rounds of different threads running at once
    round_timeout: float = 300.0
    projection_timeout: float = 60.0
    max_tool_turns: int = 4
    step_delay: float = 0.0  # seconds to pause after each node; slow motion for demos and crash tests
    # Wakes of one thread gather before a round: it starts `wake_window` seconds after the thread's
    # latest wake, at most `wake_window_max` after its first; one round answers them all
    # (services/agent/coalesce.py; docs/context-budget.md). 0 starts each round at once.
    wake_window: float = 2.0
    wake_window_max: float = 15.0
    tool_scope: ScopePolicy = field(default_factory=policy_from_env)  # every tool call checked by it

    def __post_init__(self) -> None:
        budgets = {"input_budget": self.input_budget, **dict(self.input_budgets)}
        for name, budget in budgets.items():
            if not isinstance(budget, int) or budget < INPUT_BUDGET_FLOOR:
                raise UserFacingError(f"agent config: {name} must be an integer >= {INPUT_BUDGET_FLOOR}")
        if not 0 <= self.wake_window <= self.wake_window_max:
            raise UserFacingError("agent config: need 0 <= wake_window <= wake_window_max")
        for name in ("discussion_share", "recent_share"):
            if not 0 < getattr(self, name) < 1:
                raise UserFacingError(f"agent config: {name} must be between 0 and 1")

    def input_budget_for(self, model: str) -> int:
        """The input budget of one model (by the name the config gives it)."""
        return int(self.input_budgets.get(model, self.input_budget))

    def compactor_for(self, tool: str) -> str:
        """Which compactor a tool's raw goes to (the compactor's own map); an unmapped tool keeps its
        name, and the compactor gives it the passthrough."""
        return self.tool_compactors.get(tool, tool)


# What any stdio MCP server inherits: how to run a program, nothing that authenticates anything.
BASE_ENV = (
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "INCIDENT_MEMORY_STATE_DIR",
)  # fmt: skip
# Our telemetry server's own settings (its back ends and their tokens; the projection's address it is
# given, not passed) and the scope policy.
TELEMETRY_ENV = (
    *(var for key, var in SETTINGS_ENV.items() if key not in PROJECTION_KEYS),
    IN_CLUSTER_HOST_ENV,
    IN_CLUSTER_PORT_ENV,
    SCOPE_ENV,
)


def subprocess_env(server: McpServer, environ: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a stdio MCP server: an explicit allow-list, never the agent's own."""
    allowed = (*BASE_ENV, *server.pass_env)
    return {**{k: environ[k] for k in allowed if k in environ}, **server.env}


def default_servers(database_url: str, schema: str) -> tuple[McpServer, ...]:
    return (
        McpServer(
            name="telemetry",
            command=[default_cli(), "telemetry-mcp", "--backend", "recorded"],
            env={"DATABASE_URL": database_url, "TELEMETRY_MCP_SCHEMA": schema},
            pass_env=TELEMETRY_ENV,
        ),
    )


def tools_from_env(env: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """The tool map the compactor reads: the built-in one with `COMPACTOR_TOOL_MAP` over it."""
    try:
        return tool_map(json_object_setting(TOOL_MAP_ENV, env=os.environ if env is None else env))
    except ToolMapError as exc:
        raise UserFacingError(str(exc)) from None


def build_config(
    file_data: dict[str, Any], *, env: Mapping[str, str] | None = None, **overrides: Any
) -> AgentConfig:
    """Merge a config file's object with explicit overrides (None means 'not given')."""
    merged: dict[str, Any] = {**file_data, **{k: v for k, v in overrides.items() if v is not None}}
    if "tool_compactors" in merged:
        raise UserFacingError(
            "agent config key 'tool_compactors' is gone: map tools once, for the agent and the compactor, "
            f'with {TOOL_MAP_ENV}=\'{{"my_logs": "query_loki"}}\''
        )
    servers_raw = merged.pop("mcp_servers", None)
    models_raw = merged.pop("models", None) or {}
    compactors = tools_from_env(env)
    known = set(AgentConfig.__dataclass_fields__) - {"mcp_servers", "models", "tool_compactors", "tool_scope"}
    unknown = set(merged) - known
    if unknown:
        raise UserFacingError(f"unknown agent config keys: {sorted(unknown)}")
    try:
        models = ModelConfig(**models_raw)
        servers = tuple(_server(s) for s in servers_raw) if servers_raw else ()
    except TypeError as exc:
        raise UserFacingError(f"bad agent config: {exc}") from None
    config = AgentConfig(mcp_servers=servers, models=models, tool_compactors=compactors, **merged)
    if not config.mcp_servers:
        config = _with_servers(config, default_servers(config.database_url, config.schema))
    return config


def _server(raw: dict[str, Any]) -> McpServer:
    return McpServer(**{**raw, "pass_env": tuple(raw.get("pass_env") or ())})


def _with_servers(config: AgentConfig, servers: tuple[McpServer, ...]) -> AgentConfig:
    from dataclasses import replace

    return replace(config, mcp_servers=servers)
