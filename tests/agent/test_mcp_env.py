"""Stdio MCP servers get an explicit environment allow-list, never the agent's whole environment."""

from __future__ import annotations

from services.agent.config import TELEMETRY_ENV, McpServer, build_config, default_servers, subprocess_env

AGENT_ENV = {
    "PATH": "/usr/bin",
    "OPENAI_API_KEY": "sk-model-key",
    "KAFKA_SASL_PASSWORD": "kafka-secret",
    "DATABASE_URL": "postgresql://agent:pg-secret@db/x",
    "LOKI_TOKEN": "loki-token",
}


def test_a_third_party_server_inherits_nothing_that_authenticates() -> None:
    env = subprocess_env(McpServer(name="grafana", command=["grafana-mcp"]), AGENT_ENV)
    assert env == {"PATH": "/usr/bin"}


def test_the_telemetry_server_gets_its_own_settings_and_what_it_is_given_only() -> None:
    server = McpServer(name="t", command=["x"], env={"DATABASE_URL": "dsn-given"}, pass_env=TELEMETRY_ENV)
    env = subprocess_env(server, AGENT_ENV)
    assert env == {"PATH": "/usr/bin", "LOKI_TOKEN": "loki-token", "DATABASE_URL": "dsn-given"}
    assert "sk-model-key" not in env.values() and "kafka-secret" not in env.values()


def test_the_default_server_and_a_config_file_server_are_allow_listed() -> None:
    config = build_config({"database_url": "postgresql://x", "kafka": None}, env={})
    (default,) = config.mcp_servers
    assert "OPENAI_API_KEY" not in subprocess_env(default, AGENT_ENV)
    from_file = build_config(
        {"database_url": "postgresql://x", "kafka": None,
         "mcp_servers": [{"name": "g", "command": ["g"], "pass_env": ["LOKI_TOKEN"]}]},
        env={},
    )  # fmt: skip
    assert subprocess_env(from_file.mcp_servers[0], AGENT_ENV) == {
        "PATH": "/usr/bin",
        "LOKI_TOKEN": "loki-token",
    }


def test_the_telemetry_server_started_by_the_agent_reads_every_setting_the_agent_has() -> None:
    """The agent's allow-list and the server's settings are one list (services/runtime/telemetry_settings.py):
    every setting in the agent's environment reaches the server's config, the projection's address
    is the one the agent gives, and nothing else of the agent's leaks through."""
    from services.runtime.telemetry_settings import PROJECTION_KEYS, SETTINGS_ENV
    from services.telemetry_mcp.config import from_sources

    values = {key: f"{key}-value" for key in SETTINGS_ENV} | {"backend": "http", "timeout_s": "7"}
    agent_env = {**AGENT_ENV, **{var: values[key] for key, var in SETTINGS_ENV.items()}}
    (server,) = default_servers("postgresql://given", "given_schema")
    config = from_sources(subprocess_env(server, agent_env), {}, {})
    for key in SETTINGS_ENV.keys() - set(PROJECTION_KEYS):
        expected = 7.0 if key == "timeout_s" else values[key]
        assert getattr(config, key) == expected, key
    assert (config.dsn, config.schema) == ("postgresql://given", "given_schema")
