"""The agent as an MCP client of one or more configured servers (stdio or streamable HTTP).

Tools of every server are merged by name (the first server that offers a name wins),
and described to the models in OpenAI's function format. A result is the JSON the
tool returned (structured content, else its text parsed as JSON, else the text).
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import AsyncExitStack
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Tool

from services.agent.config import McpServer, subprocess_env
from services.runtime.errors import UserFacingError

log = logging.getLogger("agent.mcp")
THREAD_ARG = "thread"  # the telemetry server scopes every call by the thread it serves


class ToolCallError(RuntimeError):
    """The MCP server answered the call with an error (its message is kept verbatim)."""


class McpToolbox:
    """Open sessions to the configured servers; `async with McpToolbox(servers) as box`."""

    def __init__(self, servers: tuple[McpServer, ...], call_timeout: float = 60.0) -> None:
        self.servers = servers
        self.call_timeout = call_timeout
        self._stack = AsyncExitStack()
        self._sessions: dict[str, ClientSession] = {}
        self.specs: dict[str, dict[str, Any]] = {}
        self.thread_scoped: set[str] = set()  # tools that take the thread (the server scopes by it)

    async def __aenter__(self) -> McpToolbox:
        for server in self.servers:
            try:
                session = await self._open(server)
                listed = await session.list_tools()
            except Exception as exc:
                await self._stack.aclose()
                raise UserFacingError(f"cannot start MCP server {server.name!r}: {exc}") from exc
            for tool in listed.tools:
                if tool.name in self._sessions:
                    continue
                self._sessions[tool.name] = session
                self.specs[tool.name] = tool_spec(tool)
                if THREAD_ARG in (tool.input_schema or {}).get("properties", {}):
                    self.thread_scoped.add(tool.name)
            log.info("mcp server ready", extra={"server": server.name, "tools": sorted(self._sessions)})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _open(self, server: McpServer) -> ClientSession:
        if server.url:
            streams = await self._stack.enter_async_context(streamable_http_client(server.url))
            read, write = streams[0], streams[1]
        else:
            params = StdioServerParameters(
                command=server.command[0],
                args=list(server.command[1:]),
                env=subprocess_env(server, os.environ),
            )
            read, write = await self._stack.enter_async_context(stdio_client(params))
        session = await self._stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return session

    def has(self, name: str) -> bool:
        return name in self._sessions

    def tool_specs(self, exclude: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        return [spec for name, spec in sorted(self.specs.items()) if name not in exclude]

    async def call(self, name: str, args: dict[str, Any], thread: str | None = None) -> Any:
        """One real call. Raises ToolCallError when the tool reports an error.

        A tool that takes the thread is given it here, by the agent, never by the model: whatever
        `thread` the arguments carry is replaced, and a call without one is not made.
        """
        if name not in self._sessions:
            raise ToolCallError(f"no MCP server offers a tool named {name!r}")
        if name in self.thread_scoped:
            if thread is None:
                raise ToolCallError(f"{name} needs the thread it serves")
            args = {**args, THREAD_ARG: thread}
        result = await self._sessions[name].call_tool(name, args, read_timeout_seconds=self.call_timeout)
        content = getattr(result, "content", None) or []
        texts = [c.text for c in content if getattr(c, "type", None) == "text"]
        if getattr(result, "is_error", False):
            raise ToolCallError(" ".join(texts)[:2000] or f"{name} failed")
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            if isinstance(structured, dict) and set(structured) == {"result"}:
                return structured["result"]
            return structured
        text = "".join(texts)
        try:
            return json.loads(text)
        except ValueError:
            return text


def tool_spec(tool: Tool) -> dict[str, Any]:
    """An MCP tool in OpenAI's function format, as the models are sent it beside investigate.

    The `thread` argument is left out: the agent supplies it, the model neither sees nor sets it.
    """
    schema = dict(tool.input_schema or {"type": "object", "properties": {}})
    if THREAD_ARG in schema.get("properties", {}):
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k != THREAD_ARG}
        schema["required"] = [r for r in schema.get("required", []) if r != THREAD_ARG]
        if not schema["required"]:
            del schema["required"]
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or tool.name,
            "parameters": lean_schema(schema),
        },
    }


def lean_schema(schema: Any) -> Any:
    """A tool's JSON Schema without what says nothing the rest does not.

    The schemas are sent beside every investigate call, so their tokens are paid on every turn.
    Dropped: the `title`s pydantic generates from the names it already has, and on an optional
    argument the `anyOf [T, null]` + `default: null` pair (leaving it out of `required` says it).
    """
    if isinstance(schema, list):
        return [lean_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: lean_schema(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    variants = out.get("anyOf")
    if "default" in out and out["default"] is None and isinstance(variants, list):
        kept = [v for v in variants if v != {"type": "null"}]
        if len(kept) == 1 and isinstance(kept[0], dict) and len(kept) < len(variants):
            rest = {k: v for k, v in out.items() if k not in ("anyOf", "default")}
            out = {**kept[0], **rest}
    return out
