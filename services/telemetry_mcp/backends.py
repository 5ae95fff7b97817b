"""The two back ends behind the tools: real HTTP APIs, or a recording. Same interface, same raw shapes.

Each method returns a `Raw`: the JSON text exactly as the back end produced it, and
its parsed value. The HTTP back end hands on the upstream body byte for byte after
checking that it is the documented shape; it never re-serialises it.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from services.runtime.errors import UserFacingError
from services.runtime.loading import load_attr
from services.telemetry_mcp import recorded, wire
from services.telemetry_mcp.config import TelemetryConfig
from services.telemetry_mcp.recorded import Recording
from services.telemetry_mcp.wire import HttpRequest, UpstreamError


@dataclass(frozen=True)
class Raw:
    text: str
    value: Any

    @classmethod
    def of(cls, value: Any) -> Raw:
        return cls(json.dumps(value, ensure_ascii=False, separators=(",", ":")), value)


class Backend(Protocol):
    async def query_loki(self, query: str, start: str, end: str, limit: int) -> Raw: ...
    async def query_prometheus(self, query: str, start: str, end: str, step: str) -> Raw: ...
    async def query_tempo(self, trace_id: str) -> Raw: ...
    async def get_pod_events(self, namespace: str, pod: str | None) -> Raw: ...
    async def aclose(self) -> None: ...


# ---- recorded --------------------------------------------------------------------------------


def load_recording(source: str | None) -> Recording:
    """A recording: a JSON file, or `package.module:function` returning its mapping. There is no
    default: the dev tools name the seed's (deploy/local/seed), production names its own."""
    if not source:
        raise UpstreamError(
            "the recorded back end needs a recording: --recording FILE or package.module:function "
            "(env TELEMETRY_MCP_RECORDING)"
        )
    if ":" in source and not Path(source).exists():
        try:
            _, make = load_attr(source, "TELEMETRY_MCP_RECORDING")
        except UserFacingError as exc:
            raise UpstreamError(f"{exc} (pass --recording FILE: the seed is a dev tool)") from None
        data = make()
    else:
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UpstreamError(f"cannot load recording {source}: {exc}") from None
    try:
        return Recording.from_mapping(data)
    except (ValueError, UpstreamError) as exc:
        raise UpstreamError(f"recording {source} is not usable: {exc}") from None


class RecordedBackend:
    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    async def query_loki(self, query: str, start: str, end: str, limit: int) -> Raw:
        return Raw.of(recorded.serve_loki(self.recording.loki, query, start, end, limit))

    async def query_prometheus(self, query: str, start: str, end: str, step: str) -> Raw:
        return Raw.of(recorded.serve_prometheus(self.recording.prometheus, query, start, end, step))

    async def query_tempo(self, trace_id: str) -> Raw:
        try:
            return Raw.of(recorded.serve_tempo(self.recording.tempo, trace_id))
        except recorded.TraceNotFound as exc:
            raise UpstreamError(f"Tempo has no such trace (HTTP 404): {exc}") from None

    async def get_pod_events(self, namespace: str, pod: str | None) -> Raw:
        return Raw.of(recorded.serve_events(self.recording.pod_events, namespace, pod))

    async def aclose(self) -> None:
        return None


# ---- http ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    name: str  # as users know it: Loki, Prometheus, Tempo, Kubernetes
    url_var: str
    base_url: str | None
    headers: dict[str, str]
    ca_file: str | None = None  # None: the system's trust store


def _auth(token: str | None, tenant: str | None = None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    return headers


class HttpBackend:
    def __init__(self, config: TelemetryConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.timeout = config.timeout_s
        self._transport = transport
        self._clients: dict[str, httpx.AsyncClient] = {}
        self.loki = Upstream(
            "Loki", "LOKI_URL", config.loki_url, _auth(config.loki_token, config.loki_tenant)
        )
        self.prometheus = Upstream(
            "Prometheus", "PROMETHEUS_URL", config.prometheus_url, _auth(config.prometheus_token)
        )
        self.tempo = Upstream(
            "Tempo", "TEMPO_URL", config.tempo_url, _auth(config.tempo_token, config.tempo_tenant)
        )
        self._k8s_config = config

    def _kubernetes(self) -> Upstream:
        config = self._k8s_config
        return Upstream(
            "Kubernetes",
            "KUBERNETES_URL",
            config.kubernetes_url,
            _auth(config.kubernetes_bearer()),
            config.kubernetes_ca_file,
        )

    def _client(self, upstream: Upstream) -> httpx.AsyncClient:
        client = self._clients.get(upstream.name)
        if client is None:
            try:
                verify: ssl.SSLContext | bool = (
                    ssl.create_default_context(cafile=upstream.ca_file) if upstream.ca_file else True
                )
            except (OSError, ssl.SSLError) as exc:
                raise UpstreamError(
                    f"cannot load the {upstream.name} CA file {upstream.ca_file}: {exc}"
                ) from None
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout),
                verify=verify,
                transport=self._transport,
                follow_redirects=False,
            )
            self._clients[upstream.name] = client
        return client

    async def _get(self, upstream: Upstream, request: HttpRequest) -> str:
        if not upstream.base_url:
            raise UpstreamError(f"{upstream.name} is not configured: set {upstream.url_var} or its flag")
        url = upstream.base_url.rstrip("/") + request.path
        headers = {**upstream.headers, **request.headers}
        try:
            response = await self._client(upstream).request(
                request.method, url, params=list(request.params), headers=headers
            )
        except httpx.TimeoutException:
            raise UpstreamError(f"{upstream.name} did not answer within {self.timeout:g}s ({url})") from None
        except httpx.HTTPError as exc:
            raise UpstreamError(f"cannot reach {upstream.name} at {url}: {exc}") from None
        if response.status_code != 200:
            raise UpstreamError(
                wire.upstream_error_message(upstream.name, response.status_code, response.text)
            )
        return response.text

    async def query_loki(self, query: str, start: str, end: str, limit: int) -> Raw:
        text = await self._get(self.loki, wire.loki_query_range(query, start, end, limit))
        return Raw(text, wire.validate_loki(wire.parse_json_object(text, "Loki")))

    async def query_prometheus(self, query: str, start: str, end: str, step: str) -> Raw:
        text = await self._get(self.prometheus, wire.prometheus_query_range(query, start, end, step))
        return Raw(text, wire.validate_prometheus(wire.parse_json_object(text, "Prometheus")))

    async def query_tempo(self, trace_id: str) -> Raw:
        text = await self._get(self.tempo, wire.tempo_trace_by_id(trace_id))
        return Raw(text, wire.validate_tempo(wire.parse_json_object(text, "Tempo")))

    async def get_pod_events(self, namespace: str, pod: str | None) -> Raw:
        request = wire.kubernetes_events(namespace, pod)
        text = await self._get(self._kubernetes(), request)
        return Raw(text, wire.validate_event_list(wire.parse_json_object(text, "Kubernetes")))

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def make_backend(config: TelemetryConfig) -> Backend:
    if config.backend == "http":
        return HttpBackend(config)
    return RecordedBackend(load_recording(config.recording))
