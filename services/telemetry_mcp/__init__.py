"""The telemetry MCP server: Loki, Prometheus, Tempo, Kubernetes events and evidence, raw and verbatim."""
