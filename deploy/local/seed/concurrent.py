"""The demo's concurrent incident (issue 37): payments-api, OOMKilled the same way 20 minutes before checkout.

Derived from the seed's own telemetry, relabelled into the `payments` namespace and shifted 20 minutes
earlier: the same failure (the same log patterns, the same pod-event reasons) in another service. Kept in
its own namespace so that checkout's queries (`{namespace="shop"}`) answer exactly what they did: the
seed thread's table is unchanged by it.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from typing import Any, Final

from deploy.local.seed.incident import SeedIncident

EARLIER: Final = timedelta(minutes=20)
NAMESPACE: Final = "payments"
SERVICE: Final = "payments-api"


def _relabel(text: str) -> str:
    return text.replace("checkout-api", SERVICE).replace("checkout", "payments")


def _shift_iso(value: str) -> str:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00")) - EARLIER
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def payments_webhook(seed: SeedIncident) -> dict[str, Any]:
    """The payments alert: the seed's, for payments-api in its namespace, starting 20 minutes earlier."""
    hook: dict[str, Any] = json.loads(
        _relabel(json.dumps(seed.alertmanager_webhook)).replace('"shop"', f'"{NAMESPACE}"')
    )
    for alert in hook["alerts"]:
        alert["startsAt"] = _shift_iso(alert["startsAt"])
        alert["fingerprint"] = "p" + alert["fingerprint"][1:]
    return hook


def _loki(loki: dict[str, Any]) -> list[dict[str, Any]]:
    shift = int(EARLIER.total_seconds() * 1e9)
    streams = []
    for stream in loki["data"]["result"]:
        if stream["stream"].get("app") != "checkout-api":
            continue
        labels = {k: _relabel(v) for k, v in stream["stream"].items()} | {"namespace": NAMESPACE}
        values = [[str(int(ns) - shift), _relabel(line)] for ns, line in stream["values"]]
        streams.append({"stream": labels, "values": values})
    return streams


def _events(events: dict[str, Any]) -> list[dict[str, Any]]:
    items = []
    for item in copy.deepcopy(events["items"]):
        item = json.loads(_relabel(json.dumps(item)).replace('"shop"', f'"{NAMESPACE}"'))
        for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
            if isinstance(item.get(key), str):
                item[key] = _shift_iso(item[key])
        items.append(item)
    return items


def _series(prometheus: dict[str, Any]) -> list[dict[str, Any]]:
    shift = EARLIER.total_seconds()
    out = []
    for series in prometheus["data"]["result"]:
        metric = {k: _relabel(v) for k, v in series["metric"].items()} | {"namespace": NAMESPACE}
        out.append({"metric": metric, "values": [[t - shift, v] for t, v in series["values"]]})
    return out


def recording_with_payments(seed: SeedIncident) -> dict[str, Any]:
    """The seed's recording plus the payments incident's telemetry (another namespace, 20 minutes earlier)."""
    loki, events, prometheus = (copy.deepcopy(x) for x in (seed.loki, seed.pod_events, seed.prometheus))
    loki["data"]["result"] = [*loki["data"]["result"], *_loki(seed.loki)]
    events["items"] = [*events["items"], *_events(seed.pod_events)]
    prometheus["data"]["result"] = [*prometheus["data"]["result"], *_series(seed.prometheus)]
    return {"loki": loki, "prometheus": prometheus, "tempo": seed.tempo, "pod_events": events}
