"""Open an MCP client session to this server as a subprocess over stdio (tests, the demo, debugging).

The agent has its own MCP client for any configured server; this is the shortest
way to talk to ours, and it reads a tool's answer back as the raw JSON it carries.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from services.runtime.settings import REPO_ROOT


def server_params(args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> StdioServerParameters:
    """`python -m services.cli telemetry-mcp ARGS` in the repository, with this interpreter."""
    merged = {**os.environ, **(env or {})}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "services.cli", "telemetry-mcp", *args],
        env=merged,
        cwd=str(REPO_ROOT),
    )


@asynccontextmanager
async def session(
    args: Sequence[str] = (), env: Mapping[str, str] | None = None, errlog: TextIO = sys.stderr
) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(server_params(args, env), errlog=errlog) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def text_of(result: CallToolResult) -> str:
    """The one text block a tool answers with: the raw JSON, or the error's reason."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if len(texts) != 1:
        raise ValueError(f"expected one text block, got {len(texts)}")
    return texts[0]


def raw_of(result: CallToolResult) -> Any:
    """The raw JSON value of a successful tool answer."""
    if result.is_error:
        raise RuntimeError(text_of(result))
    return json.loads(text_of(result))
