"""Where the telemetry back ends are. Flags win over a JSON config file, which wins over the environment.

Each HTTP back end is optional: a tool whose URL is unset answers with an error
naming the variable to set, so a site with only Loki and Prometheus still works.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from services.runtime.errors import UserFacingError
from services.runtime.loading import json_object_file
from services.runtime.settings import Settings
from services.runtime.telemetry_settings import IN_CLUSTER_HOST_ENV, IN_CLUSTER_PORT_ENV, SETTINGS_ENV

BACKENDS = ("recorded", "http")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class TelemetryConfig:
    backend: str = "recorded"
    recording: str | None = None  # a JSON file {"loki","prometheus","tempo","pod_events"}; default: the seed
    loki_url: str | None = None
    loki_token: str | None = None
    loki_tenant: str | None = None  # X-Scope-OrgID for multi-tenant Loki
    prometheus_url: str | None = None
    prometheus_token: str | None = None
    tempo_url: str | None = None
    tempo_token: str | None = None
    tempo_tenant: str | None = None
    kubernetes_url: str | None = None
    kubernetes_token: str | None = None
    kubernetes_token_file: str | None = None
    kubernetes_ca_file: str | None = None
    timeout_s: float = 30.0
    dsn: str = ""
    schema: str = "public"
    unscoped: bool = False  # skip the per-thread scope check: refused with the http back end

    def validated(self) -> TelemetryConfig:
        if self.backend not in BACKENDS:
            raise UserFacingError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if not self.timeout_s > 0:
            raise UserFacingError(f"timeout must be positive, got {self.timeout_s}")
        if self.unscoped and self.backend != "recorded":
            raise UserFacingError(
                "--unscoped is for the recorded back end only; real telemetry is always scoped"
            )
        if not self.schema.replace("_", "a").isalnum():
            raise UserFacingError(f"schema must be a plain identifier, got {self.schema!r}")
        return self

    def kubernetes_bearer(self) -> str | None:
        """The API token: given directly, or read from a file (a service account's, in a pod)."""
        if self.kubernetes_token:
            return self.kubernetes_token
        if self.kubernetes_token_file:
            try:
                return Path(self.kubernetes_token_file).read_text().strip()
            except OSError as exc:
                raise UserFacingError(f"cannot read the Kubernetes token file: {exc}") from None
        return None


def _coerce(key: str, value: Any) -> Any:
    if value is None or value == "":
        return None
    if key == "unscoped":
        return value is True or str(value).lower() in ("1", "true", "yes")
    if key == "timeout_s":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise UserFacingError(f"timeout must be a number of seconds, got {value!r}") from None
    return str(value)


def from_sources(
    env: Mapping[str, str], file_values: Mapping[str, Any], flags: Mapping[str, Any]
) -> TelemetryConfig:
    """Merge environment < config file < flags; then fill in-cluster Kubernetes defaults."""
    known = {f.name for f in fields(TelemetryConfig)}
    unknown = sorted(set(file_values) - known)
    if unknown:
        raise UserFacingError(f"unknown config keys: {', '.join(unknown)}")
    values: dict[str, Any] = {"dsn": Settings.from_env().database_url}
    for key, var in SETTINGS_ENV.items():
        if (v := _coerce(key, env.get(var))) is not None:
            values[key] = v
    for source in (file_values, flags):
        for key, raw in source.items():
            if key in known and (v := _coerce(key, raw)) is not None:
                values[key] = v
    config = TelemetryConfig(**values)
    host, port = env.get(IN_CLUSTER_HOST_ENV), env.get(IN_CLUSTER_PORT_ENV, "443")
    if config.kubernetes_url is None and host:
        config = replace(config, kubernetes_url=f"https://{host}:{port}")
        if config.kubernetes_token is None and config.kubernetes_token_file is None:
            config = replace(config, kubernetes_token_file=str(SERVICE_ACCOUNT / "token"))
        if config.kubernetes_ca_file is None:
            config = replace(config, kubernetes_ca_file=str(SERVICE_ACCOUNT / "ca.crt"))
    return config.validated()


def load(flags: Mapping[str, Any], config_path: str | None = None) -> TelemetryConfig:
    return from_sources(os.environ, json_object_file(config_path), flags)
