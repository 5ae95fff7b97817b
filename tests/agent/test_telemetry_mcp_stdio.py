"""The telemetry MCP server as a real subprocess over stdio, on the recorded back end.

The client is the `mcp` package's own stdio client; every tool is called as the agent
calls it, and its answer must be the real system's raw format, verbatim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from deploy.local.pipeline import Proc
from deploy.local.ports import free_port
from deploy.local.seed import seed_incident
from services.runtime.settings import REPO_ROOT
from services.telemetry_mcp.client import raw_of, session, text_of
from services.telemetry_mcp.recorded import trace_ids
from services.telemetry_mcp.server import TOOL_NAMES

START, END = "2026-03-14T03:00:00Z", "2026-03-14T03:15:00Z"
POD = "checkout-api-7d9f8b6c5-x2k4q"


async def _call(client: ClientSession, tool: str, args: dict[str, Any]) -> tuple[Any, str, bool]:
    result = await client.call_tool(tool, args)
    text = text_of(result)
    if not result.is_error:
        assert result.structured_content == json.loads(text)  # the structured copy is the same raw
    return result, text, bool(result.is_error)


def test_every_tool_answers_with_the_raw_over_stdio() -> None:
    seed = seed_incident()
    (trace_id,) = trace_ids(seed.tempo)

    async def main() -> None:
        async with session(["--backend", "recorded", "--unscoped"]) as client:
            listed = await client.list_tools()
            assert sorted(t.name for t in listed.tools) == sorted(TOOL_NAMES)
            schema = {t.name: t.input_schema for t in listed.tools}
            assert schema["query_loki"]["required"] == ["query", "start", "end"]
            assert schema["query_loki"]["properties"]["limit"]["default"] == 5000
            assert schema["get_pod_events"]["required"] == ["namespace"]

            loki = raw_of(
                await client.call_tool(
                    "query_loki", {"query": '{namespace="shop"}', "start": START, "end": END}
                )
            )
            assert loki == seed.loki
            assert loki["data"]["resultType"] == "streams"
            assert all(
                isinstance(ns, str) and ns.isdigit() for s in loki["data"]["result"] for ns, _ in s["values"]
            )

            narrow = raw_of(
                await client.call_tool(
                    "query_loki",
                    {
                        "query": '{namespace="shop"} |= "FATAL"',
                        "start": "2026-03-14T03:13:00Z",
                        "end": END,
                        "limit": 50,
                    },
                )
            )
            lines = [line for s in narrow["data"]["result"] for _, line in s["values"]]
            assert len(lines) == 50 and set(lines) == {"FATAL ERROR: JS heap out of memory"}

            prom_args = {
                "query": 'container_memory_working_set_bytes{namespace="shop",container="checkout-api"}',
                "start": START,
                "end": END,
                "step": "15s",
            }
            prom = raw_of(await client.call_tool("query_prometheus", prom_args))
            assert prom == seed.prometheus and prom["data"]["resultType"] == "matrix"
            coarse = raw_of(await client.call_tool("query_prometheus", {**prom_args, "step": "5m"}))
            assert [len(s["values"]) for s in coarse["data"]["result"]] == [4, 4, 4, 4]

            trace = raw_of(await client.call_tool("query_tempo", {"trace_id": trace_id}))
            assert trace == seed.tempo and "batches" in trace

            events = raw_of(await client.call_tool("get_pod_events", {"namespace": "shop"}))
            assert events == seed.pod_events and events["kind"] == "EventList" and len(events["items"]) == 30
            mine = raw_of(await client.call_tool("get_pod_events", {"namespace": "shop", "pod": POD}))
            assert mine["items"] and {i["involvedObject"]["name"] for i in mine["items"]} == {POD}

    anyio.run(main)


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("query_loki", {"query": '{namespace="shop"}', "start": END, "end": START}, "before start"),
    ("query_loki", {"query": 'rate({app="x"}[1m])', "start": START, "end": END}, "metric queries"),
    ("query_loki", {"query": '{namespace="shop"}', "start": "noon", "end": END}, "not a time"),
    ("query_prometheus", {"query": "up", "start": START, "end": END, "step": "fast"}, "not a duration"),
    ("query_tempo", {"trace_id": "0" * 31 + "1"}, "no such trace"),
    ("get_pod_events", {"namespace": "Not_A_Namespace"}, "DNS-1123"),
    ("query_loki", {"query": '{namespace="shop"}', "start": START}, "end"),  # missing argument
]


def test_bad_calls_get_a_clear_tool_error_and_the_server_keeps_serving() -> None:
    async def main() -> None:
        async with session(["--backend", "recorded", "--unscoped"]) as client:
            for tool, args, needle in BAD_CALLS:
                _, text, is_error = await _call(client, tool, args)
                assert is_error and needle in text, (tool, args, text)
                _, _, still_error = await _call(client, "get_pod_events", {"namespace": "shop"})
                assert not still_error

    anyio.run(main)


def test_streamable_http_on_port(tmp_path: Path) -> None:
    """`--port` serves the same tools over streamable HTTP (loopback)."""
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "services.cli",
        "telemetry-mcp",
        "--backend",
        "recorded",
        "--unscoped",
        "--port",
        str(port),
    ]
    url = f"http://127.0.0.1:{port}/mcp"

    def answers() -> bool:  # the port accepts connections: any HTTP answer will do
        try:
            httpx.get(url)
        except httpx.TransportError:
            return False
        return True

    log = tmp_path / "telemetry-mcp.log"
    proc = Proc("telemetry-mcp", cmd, dict(os.environ), log, ready=answers, port=port, cwd=REPO_ROOT)

    async def main() -> None:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            events = raw_of(await client.call_tool("get_pod_events", {"namespace": "shop"}))
            assert events == seed_incident().pod_events

    try:
        proc.start().wait_ready(30)
        anyio.run(main)
    finally:
        proc.stop(10)


@pytest.mark.slow
def test_start_up_problems_are_one_line_errors(tmp_path: Path) -> None:
    """A bad recording or config file stops the server before it serves, with exit 1 and one line."""
    bad_recording = tmp_path / "rec.json"
    bad_recording.write_text(json.dumps({"loki": {}, "prometheus": {}}))
    bad_config = tmp_path / "cfg.json"
    bad_config.write_text(json.dumps({"backend": "http", "loki": "typo"}))
    for extra, needle in (
        (["--recording", str(bad_recording)], "lacks tempo, pod_events"),
        (["--config", str(bad_config)], "unknown config keys: loki"),
        (["--config", str(tmp_path / "missing.json")], "cannot read config file"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "services.cli", "telemetry-mcp", *extra],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert (
            len(lines) == 1 and lines[0].startswith("incident-memory telemetry-mcp: ") and needle in lines[0]
        )
