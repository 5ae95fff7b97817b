"""`incident-memory telemetry-mcp`: the telemetry MCP server (stdio by default, streamable HTTP on --port).

Every tool answers with the back end's raw JSON, verbatim, as text content (and as
structured content when it is an object), because the compactor downstream needs
the real systems' own formats. `get_evidence` hands back what was stored with its credentials
redacted (typed markers; services/boundary/redact.py), as are the tools' error messages: both go
to a model (invariant 13).
"""

from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, ParamSpec

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from schemas.recall import RecallError, channel_groups
from services.boundary.redact import redact_text, redact_value
from services.boundary.scope import Checked, ScopePolicy
from services.boundary.timearg import BadTimeArg
from services.runtime import embeddings
from services.runtime.errors import BadInput, UserFacingError
from services.runtime.logs import configure_logging
from services.runtime.scope_setting import policy_from_env
from services.telemetry_mcp import config as config_mod
from services.telemetry_mcp.backends import Backend, Raw, make_backend
from services.telemetry_mcp.config import TelemetryConfig
from services.telemetry_mcp.evidence import EvidenceNotFound, EvidenceStore, EvidenceUnavailable
from services.telemetry_mcp.incident_recall import BadRecall, IncidentRecall, RecallUnavailable
from services.telemetry_mcp.scoping import ScopeRefused, ThreadScopes, checked_meta
from services.telemetry_mcp.thread_search import BadSearch, ThreadSearch, ThreadSearchUnavailable
from services.telemetry_mcp.wire import ToolArgError, UpstreamError

log = logging.getLogger(__name__)
P = ParamSpec("P")

SERVER_NAME = "incident-memory-telemetry"
TOOL_NAMES = (
    "query_loki",
    "query_prometheus",
    "query_tempo",
    "get_pod_events",
    "get_evidence",
    "search_thread",
    "recall_incidents",
)
EXPECTED = (
    ToolArgError,
    BadTimeArg,
    UpstreamError,
    EvidenceNotFound,
    EvidenceUnavailable,
    ScopeRefused,
    BadSearch,
    ThreadSearchUnavailable,
    BadRecall,
    RecallUnavailable,
)

Time = Annotated[str, Field(description="RFC 3339 or Unix s/ns")]
# Required unless the server runs --unscoped (recorded back end only); the agent sets it, not the model.
Thread = Annotated[str | None, Field(description="the Slack thread this call serves")]


def result_of(raw: Raw, meta: dict[str, Any] | None = None) -> CallToolResult:
    """The raw as JSON text, plus structured content when the raw is a JSON object."""
    structured = raw.value if isinstance(raw.value, dict) else None
    return CallToolResult(
        content=[TextContent(type="text", text=raw.text)], structured_content=structured, _meta=meta
    )


def _guarded(
    tool: Callable[P, Awaitable[CallToolResult]],
) -> Callable[P, Coroutine[Any, Any, CallToolResult]]:
    """A tool whose anticipated failures become tool errors with their one-line reason. The wrapper
    keeps the tool's signature (`functools.wraps`), which is what the MCP server reads its schema from."""

    @functools.wraps(tool)
    async def call(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await tool(*args, **kwargs)
        except EXPECTED as exc:  # an upstream's URL or answer may carry a credential: redacted
            raise ToolError(redact_text(str(exc))) from exc

    return call


def _tool_registrar(
    app: MCPServer[Any],
) -> Callable[[Callable[P, Awaitable[CallToolResult]]], Callable[P, Coroutine[Any, Any, CallToolResult]]]:
    """The one decorator of this server's tools: each is registered on `app` behind `_guarded`, so no
    tool can be offered without its errors redacted."""

    def register(
        tool: Callable[P, Awaitable[CallToolResult]],
    ) -> Callable[P, Coroutine[Any, Any, CallToolResult]]:
        guarded = _guarded(tool)
        app.tool()(guarded)
        return guarded

    return register


@dataclass(frozen=True)
class _ToolDeps:
    """What the tools share: the back end, the stores over the projection, and the scope check."""

    config: TelemetryConfig
    backend: Backend
    evidence: EvidenceStore
    threads: ThreadSearch
    incidents: IncidentRecall
    scopes: ThreadScopes

    async def checked(self, thread: str | None, tool: str, args: dict[str, Any]) -> Checked:
        if self.config.unscoped:
            return Checked(tool, args)
        return await self.scopes.check(thread, tool, args)


def build_server(
    config: TelemetryConfig, backend: Backend | None = None, policy: ScopePolicy | None = None
) -> MCPServer[Any]:
    """The MCP server with its five tools, bound to one back end and one evidence store.

    Every call names its thread; the server derives that thread's window and scope from the
    projection and checks the call itself (services/boundary/scope.py) before any back end is asked.
    Only `--unscoped` on the recorded back end (dev data) skips the check.
    """
    deps = _ToolDeps(
        config=config,
        backend=backend if backend is not None else make_backend(config),
        evidence=EvidenceStore(config.dsn, config.schema, config.timeout_s),
        threads=ThreadSearch(config.dsn, config.schema, config.timeout_s),
        incidents=IncidentRecall(config.dsn, config.schema, config.timeout_s, embeddings.from_env()),
        scopes=ThreadScopes(config.dsn, config.schema, policy or policy_from_env(), config.timeout_s),
    )

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            await deps.backend.aclose()

    app: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        instructions=(
            "Telemetry for incident investigation. Every tool returns the system's raw JSON. "
            "Each call names its thread; it is confined to that thread's alert window and scope. "
            "get_evidence(id) returns a stored raw of that thread by evidence id."
        ),
        lifespan=lifespan,
    )
    _add_telemetry_tools(app, deps)
    _add_thread_tools(app, deps)
    return app


def _add_telemetry_tools(app: MCPServer[Any], deps: _ToolDeps) -> None:
    """The four that ask a back end (Loki, Prometheus, Tempo, Kubernetes), each checked first."""
    tool = _tool_registrar(app)

    @tool
    async def query_loki(
        query: Annotated[str, Field(description="LogQL")],
        start: Time,
        end: Time,
        limit: Annotated[int, Field(description="max lines")] = 5000,
        thread: Thread = None,
    ) -> CallToolResult:
        """Loki log lines in [start, end]."""
        c = await deps.checked(
            thread, "query_loki", {"query": query, "start": start, "end": end, "limit": limit}
        )
        a = c.args
        raw = await deps.backend.query_loki(a["query"], a["start"], a["end"], a.get("limit", limit))
        return result_of(raw, checked_meta(c))

    @tool
    async def query_prometheus(
        query: Annotated[str, Field(description="PromQL")],
        start: Time,
        end: Time,
        step: Annotated[str, Field(description="e.g. 15s")],
        thread: Thread = None,
    ) -> CallToolResult:
        """Prometheus series in [start, end]."""
        args = {"query": query, "start": start, "end": end, "step": step}
        c = await deps.checked(thread, "query_prometheus", args)
        a = c.args
        raw = await deps.backend.query_prometheus(a["query"], a["start"], a["end"], a["step"])
        return result_of(raw, checked_meta(c))

    @tool
    async def query_tempo(
        trace_id: Annotated[str, Field(description="hex")],
        thread: Thread = None,
    ) -> CallToolResult:
        """Tempo trace by id."""
        await deps.checked(thread, "query_tempo", {"trace_id": trace_id})
        return result_of(await deps.backend.query_tempo(trace_id))

    @tool
    async def get_pod_events(
        namespace: str,
        pod: Annotated[str | None, Field(description="default: all pods")] = None,
        thread: Thread = None,
    ) -> CallToolResult:
        """Kubernetes events of a namespace."""
        await deps.checked(thread, "get_pod_events", {"namespace": namespace, "pod": pod})
        return result_of(await deps.backend.get_pod_events(namespace, pod))


def _add_thread_tools(app: MCPServer[Any], deps: _ToolDeps) -> None:
    """The three that read the projection: a stored raw, the thread's words, similar incidents."""
    tool = _tool_registrar(app)

    @tool
    async def get_evidence(
        id: Annotated[str, Field(description="evidence id, thread_ts:round:node:i")],
        thread: Thread = None,
    ) -> CallToolResult:
        """The raw content of one stored message of the thread (a tool result, alert, human turn...),
        credentials redacted."""
        if not thread and not deps.config.unscoped:
            raise ScopeRefused("get_evidence refused: name the thread whose evidence this is")
        row = await deps.evidence.get(id, thread or None)
        # the raw at rest is verbatim; what leaves is redacted (invariant 13)
        return result_of(Raw.of(redact_value(row.content)), {"incident_memory/evidence": row.meta()})

    @tool
    async def search_thread(
        query: Annotated[str, Field(description="words to find in the thread's messages")],
        thread: Thread = None,
    ) -> CallToolResult:
        """Full-text search over this thread's human messages: ids, authors, times, their own words."""
        if not thread:  # never unscoped: a search names the one thread it reads
            raise ScopeRefused("search_thread refused: name the thread whose messages to search")
        return result_of(Raw.of(await deps.threads.search(thread, query)))

    @tool
    async def recall_incidents(
        query: Annotated[str, Field(description="words to match")],
        thread: Thread = None,
    ) -> CallToolResult:
        """Incidents like this one (concurrent or past, how resolved), with reasons."""
        if not thread:  # never unscoped: the thread's own channel decides what it may see
            raise ScopeRefused("recall_incidents refused: name the thread whose incidents to recall")
        await deps.scopes.check(thread, "recall_incidents", {"query": query})  # even --unscoped
        return result_of(Raw.of(await deps.incidents.recall(thread, query)))


# ---- CLI -------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", help="JSON file with any of the keys below (flags win over it, it wins over env)"
    )
    parser.add_argument(
        "--backend", choices=config_mod.BACKENDS, help="recorded (default) or http; env TELEMETRY_MCP_BACKEND"
    )
    parser.add_argument(
        "--recording",
        help="recorded back end: a JSON file {loki, prometheus, tempo, pod_events}; default the seed incident",
    )
    parser.add_argument("--loki-url", help="env LOKI_URL (token LOKI_TOKEN, tenant LOKI_TENANT)")
    parser.add_argument("--prometheus-url", help="env PROMETHEUS_URL (token PROMETHEUS_TOKEN)")
    parser.add_argument("--tempo-url", help="env TEMPO_URL (token TEMPO_TOKEN, tenant TEMPO_TENANT)")
    parser.add_argument(
        "--kubernetes-url", help="env KUBERNETES_URL (in a pod: the service account's API server)"
    )
    parser.add_argument(
        "--kubernetes-token-file", help="env KUBERNETES_TOKEN_FILE, or the token itself in KUBERNETES_TOKEN"
    )
    parser.add_argument("--kubernetes-ca-file", help="env KUBERNETES_CA_FILE: CA bundle of the API server")
    parser.add_argument(
        "--timeout", dest="timeout_s", type=float, help="per-request timeout in seconds (default 30)"
    )
    parser.add_argument("--dsn", help="Postgres for get_evidence; env DATABASE_URL")
    parser.add_argument("--schema", help="Postgres schema (search_path) of agent_messages; default public")
    parser.add_argument(
        "--unscoped",
        action="store_true",
        default=None,
        help="recorded back end only (dev data): skip the per-thread window and scope check",
    )
    parser.add_argument("--port", type=int, help="serve streamable HTTP on this port instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="bind address for --port (default 127.0.0.1)")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper
    )


def config_from_args(args: argparse.Namespace) -> TelemetryConfig:
    keys = {f for f in TelemetryConfig.__dataclass_fields__}
    flags = {k: v for k, v in vars(args).items() if k in keys}
    return config_mod.load(flags, getattr(args, "config", None))


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        channel_groups()  # RECALL_CHANNEL_GROUPS: a bad value is one line at start, not a failed tool call
    except RecallError as exc:
        raise BadInput(str(exc)) from None
    try:
        app = build_server(config)
    except UpstreamError as exc:
        raise UserFacingError(str(exc)) from None
    configure_logging("telemetry-mcp", args.log_level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request, with the query in it
    log.info("telemetry MCP server starting", extra={"backend": config.backend, "port": args.port})
    if args.port is not None:
        app.run("streamable-http", host=args.host, port=args.port)
    else:
        app.run("stdio")
    return 0
