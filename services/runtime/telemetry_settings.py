"""The telemetry MCP server's settings, by environment variable: the server reads them
(services/telemetry_mcp/config.py) and the agent, which starts it as a stdio subprocess, passes it
exactly these from its own environment and nothing else (services/agent/config.py). Both read the
names here, so a setting added to the server cannot be silently withheld by the agent."""

from __future__ import annotations

# config key (a flag's or a config file's name for it) -> environment variable
SETTINGS_ENV: dict[str, str] = {
    "backend": "TELEMETRY_MCP_BACKEND",
    "recording": "TELEMETRY_MCP_RECORDING",
    "loki_url": "LOKI_URL",
    "loki_token": "LOKI_TOKEN",
    "loki_tenant": "LOKI_TENANT",
    "prometheus_url": "PROMETHEUS_URL",
    "prometheus_token": "PROMETHEUS_TOKEN",
    "tempo_url": "TEMPO_URL",
    "tempo_token": "TEMPO_TOKEN",
    "tempo_tenant": "TEMPO_TENANT",
    "kubernetes_url": "KUBERNETES_URL",
    "kubernetes_token": "KUBERNETES_TOKEN",
    "kubernetes_token_file": "KUBERNETES_TOKEN_FILE",
    "kubernetes_ca_file": "KUBERNETES_CA_FILE",
    "timeout_s": "TELEMETRY_TIMEOUT_S",
    "dsn": "DATABASE_URL",
    "schema": "TELEMETRY_MCP_SCHEMA",
}
# The projection's address: the agent gives the server its own (the `env` of its McpServer), so
# these two are never passed through from the agent's environment.
PROJECTION_KEYS = ("dsn", "schema")
# Kubernetes' in-pod service address: the default `kubernetes_url` when none is set.
IN_CLUSTER_HOST_ENV = "KUBERNETES_SERVICE_HOST"
IN_CLUSTER_PORT_ENV = "KUBERNETES_SERVICE_PORT"
