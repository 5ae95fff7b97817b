"""The `http` back end against a small fake HTTP server on 127.0.0.1.

The fake (http.server, started by this test) is a stand-in for Loki, Prometheus, Tempo
and the Kubernetes API only: it serves their documented JSON shapes so the test can
check the requests we send and that the answer reaches the MCP client byte for byte.
It stands in for no Kafka or Postgres behaviour. The MCP server runs as a real
subprocess over stdio.
"""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from services.telemetry_mcp.backends import HttpBackend
from services.telemetry_mcp.client import raw_of, session, text_of
from services.telemetry_mcp.config import TelemetryConfig
from services.telemetry_mcp.wire import UpstreamError

from .scope_rows import project_alert

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
K8S_TOKEN = "k8s-test-token"
# Pretty-printed on purpose, with odd key order: a re-serialised answer would not match.
LOKI_BODY = json.dumps(
    {
        "status": "success",
        "data": {
            "resultType": "streams",
            "result": [
                {
                    "stream": {"namespace": "shop", "app": "checkout-api"},
                    "values": [["1773458041902000000", "FATAL ERROR: JS heap out of memory"]],
                }
            ],
            "stats": {"summary": {"totalEntriesReturned": 1}},
        },
    },
    indent=3,
)
PROM_BODY = (
    '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","job":"kubelet"},'
    '"values":[[1773457200,"1"],[1773457260.5,"0"]]}]}}'
)
TEMPO_BODY = json.dumps(
    {
        "batches": [
            {"resource": {"attributes": []}, "scopeSpans": [{"spans": [{"traceId": TRACE_ID, "name": "x"}]}]}
        ]
    }
)
EVENTS_BODY = json.dumps(
    {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": [{"reason": "OOMKilling"}]}
)


class FakeTelemetry(BaseHTTPRequestHandler):
    """Answers like Loki / Prometheus / Tempo / Kubernetes, and records what it was asked."""

    requests: list[dict[str, Any]]
    release: threading.Event

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.requests.append({"path": url.path, "query": query, "headers": dict(self.headers)})
        if url.path.startswith("/slow/"):
            self.release.wait(10)
            return self._send(200, TEMPO_BODY)
        if url.path == "/loki/api/v1/query_range":
            if "bad=" in query.get("query", ""):
                return self._send(200, "<html>maintenance</html>", "text/html")
            return self._send(200, LOKI_BODY)
        if url.path == "/api/v1/query_range":
            if query.get("query") == "up(":
                return self._send(
                    400,
                    '{"status":"error","errorType":"bad_data","error":"1:4: parse error: unclosed left parenthesis"}',
                )
            return self._send(200, PROM_BODY)
        if url.path.startswith("/api/traces/"):
            if url.path == f"/api/traces/{TRACE_ID}":
                return self._send(200, TEMPO_BODY)
            return self._send(404, "trace not found", "text/plain")
        if url.path == "/api/v1/namespaces/shop/events":
            if self.headers.get("Authorization") != f"Bearer {K8S_TOKEN}":
                return self._send(
                    401, json.dumps({"kind": "Status", "status": "Failure", "message": "Unauthorized"})
                )
            return self._send(200, EVENTS_BODY)
        return self._send(404, "404 page not found", "text/plain")


@pytest.fixture
def fake() -> Iterator[tuple[str, list[dict[str, Any]], threading.Event]]:
    requests: list[dict[str, Any]] = []
    release = threading.Event()
    handler = type("Handler", (FakeTelemetry,), {"requests": requests, "release": release})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests, release
    finally:
        release.set()
        server.shutdown()
        server.server_close()


UP = 'up{namespace="shop"}'
THREAD = "C0SHOP-1773457200.000100"


def test_http_back_end_passes_the_raw_through_verbatim(
    fake: tuple[str, list[dict[str, Any]], threading.Event], pg_dsn: str, pg_schema: str, pg_conn: Any
) -> None:
    base, requests, _ = fake
    project_alert(pg_conn, THREAD)  # the server reads the thread's window and scope from the projection
    token_env = {"KUBERNETES_TOKEN": K8S_TOKEN, "LOKI_TENANT": "tenant-a"}
    args = ["--backend", "http", "--loki-url", base, "--prometheus-url", base + "/", "--tempo-url", base]
    args += ["--kubernetes-url", base, "--timeout", "5", "--dsn", pg_dsn, "--schema", pg_schema]

    async def main() -> None:
        async with session(args, env=token_env) as client:
            loki = await client.call_tool(
                "query_loki",
                {
                    "query": '{namespace="shop"}',
                    "start": "2026-03-14T03:00:00Z",
                    "end": "1773458100",
                    "limit": 100,
                    "thread": THREAD,
                },
            )
            assert not loki.is_error and text_of(loki) == LOKI_BODY  # byte for byte, not re-serialised
            assert loki.structured_content == json.loads(LOKI_BODY)
            prom = await client.call_tool(
                "query_prometheus",
                {
                    "query": UP,
                    "start": "2026-03-14T03:00:00Z",
                    "end": "2026-03-14T03:15:00Z",
                    "step": "1m",
                    "thread": THREAD,
                },
            )
            assert text_of(prom) == PROM_BODY
            trace = await client.call_tool("query_tempo", {"trace_id": TRACE_ID.upper(), "thread": THREAD})
            assert text_of(trace) == TEMPO_BODY
            events = await client.call_tool(
                "get_pod_events", {"namespace": "shop", "pod": "checkout-api-1", "thread": THREAD}
            )
            assert text_of(events) == EVENTS_BODY

            errors = {
                "prom": await client.call_tool(
                    "query_prometheus",
                    {
                        "query": "up(",
                        "start": "1773457200",
                        "end": "1773458100",
                        "step": "15s",
                        "thread": THREAD,
                    },
                ),
                "tempo": await client.call_tool("query_tempo", {"trace_id": "abc", "thread": THREAD}),
                "loki": await client.call_tool(
                    "query_loki",
                    {
                        "query": '{namespace="shop",bad="json"}',
                        "start": "1773457200",
                        "end": "1773458100",
                        "thread": THREAD,
                    },
                ),
            }
            assert all(r.is_error for r in errors.values())
            # PromQL that cannot be parsed is refused by the scope check: it never reaches Prometheus.
            assert "cannot parse the PromQL" in text_of(errors["prom"])
            assert "Tempo has no such trace (HTTP 404)" in text_of(errors["tempo"])
            assert "Loki answered with something not a JSON object" in text_of(errors["loki"])

    anyio.run(main)

    by_path: dict[str, dict[str, Any]] = {}
    for r in requests:
        by_path.setdefault(r["path"], r)  # the first call on each path
    loki_req = by_path["/loki/api/v1/query_range"]
    assert loki_req["query"] == {
        "query": '{namespace="shop"}',
        "start": "1773457200000000000",
        "end": "1773458100000000000",
        "limit": "100",
        "direction": "backward",
    }
    assert loki_req["headers"]["X-Scope-OrgID"] == "tenant-a"
    prom_req = next(r for r in requests if r["path"] == "/api/v1/query_range" and r["query"]["query"] == UP)
    assert prom_req["query"] == {"query": UP, "start": "1773457200", "end": "1773458100", "step": "60"}
    assert f"/api/traces/{TRACE_ID}" in by_path  # lower-cased, as Tempo stores ids
    k8s = by_path["/api/v1/namespaces/shop/events"]
    assert k8s["query"] == {"fieldSelector": "involvedObject.kind=Pod,involvedObject.name=checkout-api-1"}
    assert k8s["headers"]["Authorization"] == f"Bearer {K8S_TOKEN}"


def test_http_back_end_errors_are_clear(fake: tuple[str, list[dict[str, Any]], threading.Event]) -> None:
    """Unset URL, a slow back end, an unreachable one and a refused token each name the cause."""
    base, _, release = fake
    window = ("2026-03-14T03:00:00Z", "2026-03-14T03:15:00Z")

    async def main() -> None:
        unset = HttpBackend(TelemetryConfig(backend="http"))
        with pytest.raises(UpstreamError, match="Loki is not configured: set LOKI_URL"):
            await unset.query_loki('{a="b"}', *window, 10)

        slow = HttpBackend(TelemetryConfig(backend="http", tempo_url=base + "/slow", timeout_s=0.3))
        with pytest.raises(UpstreamError, match=r"Tempo did not answer within 0.3s"):
            await slow.query_tempo(TRACE_ID)
        release.set()
        await slow.aclose()

        with anyio.fail_after(10):
            dead = HttpBackend(
                TelemetryConfig(backend="http", prometheus_url="http://127.0.0.1:9", timeout_s=2)
            )
            with pytest.raises(
                UpstreamError, match=re.escape("cannot reach Prometheus at http://127.0.0.1:9")
            ):
                await dead.query_prometheus("up", *window, "15s")

        refused = HttpBackend(TelemetryConfig(backend="http", kubernetes_url=base, kubernetes_token="wrong"))
        with pytest.raises(UpstreamError, match="Kubernetes answered HTTP 401: Unauthorized"):
            await refused.get_pod_events("shop", None)
        await refused.aclose()

    anyio.run(main)


def test_the_raw_of_a_tool_answer_is_its_json() -> None:
    from mcp.types import CallToolResult, TextContent

    ok = CallToolResult(content=[TextContent(type="text", text='{"a": [1]}')])
    assert raw_of(ok) == {"a": [1]}
    with pytest.raises(RuntimeError, match="boom"):
        raw_of(CallToolResult(content=[TextContent(type="text", text="boom")], is_error=True))


def test_kubernetes_over_tls_trusts_exactly_the_configured_ca(tmp_path: Path) -> None:
    """The API server's certificate is checked against KUBERNETES_CA_FILE, and the bearer token is sent."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    requests: list[dict[str, Any]] = []
    handler = type("Handler", (FakeTelemetry,), {"requests": requests, "release": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"

    async def main() -> None:
        trusted = HttpBackend(
            TelemetryConfig(
                backend="http", kubernetes_url=url, kubernetes_token=K8S_TOKEN, kubernetes_ca_file=str(cert)
            )
        )
        raw = await trusted.get_pod_events("shop", None)
        assert raw.text == EVENTS_BODY
        await trusted.aclose()
        untrusted = HttpBackend(
            TelemetryConfig(backend="http", kubernetes_url=url, kubernetes_token=K8S_TOKEN)
        )
        with pytest.raises(UpstreamError, match="cannot reach Kubernetes"):
            await untrusted.get_pod_events("shop", None)
        await untrusted.aclose()

    try:
        anyio.run(main)
    finally:
        server.shutdown()
        server.server_close()
    assert requests[0]["headers"]["Authorization"] == f"Bearer {K8S_TOKEN}"
