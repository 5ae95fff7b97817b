"""The production ingress exposes exactly ingest's two public endpoints (offline: the file itself)."""

from __future__ import annotations

from pathlib import Path

import yaml

INGRESS = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "overlays" / "production" / "ingress.yaml"


def test_only_slack_events_and_alertmanager_are_exposed() -> None:
    (doc,) = [d for d in yaml.safe_load_all(INGRESS.read_text()) if d]
    assert doc["kind"] == "Ingress"
    exposed = [
        (p["path"], p["pathType"], p["backend"]["service"]["name"])
        for rule in doc["spec"]["rules"]
        for p in rule["http"]["paths"]
    ]
    assert sorted(exposed) == [("/alertmanager", "Exact", "ingest"), ("/slack/events", "Exact", "ingest")]
    assert "defaultBackend" not in doc["spec"]  # nothing else falls through to a service
