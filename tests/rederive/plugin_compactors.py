"""New compactor versions, loaded with COMPACTOR_PLUGINS by the rederive tests.

`draft` is an honest new Loki version (a changed header, every fact kept), `prometheus_draft` an
honest new Prometheus one; `draft_drops_count` is the planted regression: a Loki version that no
longer states how many lines each pattern and the whole answer had. A re-derivation through any of
them changes the compactor version of every row of its tool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from services.compaction import loki, prometheus
from services.compaction.model import Draft

VERSION = "rederive-test.2"
_COUNT = re.compile(r"^\d+× ")


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    base = loki.draft(raw, alert_context, evidence_id)
    return replace(base, headers=tuple({**h, "format": "loki/2"} for h in base.headers))


def prometheus_draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """An honest new Prometheus version too (a changed header), so a thread has several rows that
    differ between the two projections: a read that mixed them would show."""
    base = prometheus.draft(raw, alert_context, evidence_id)
    return replace(base, headers=tuple({**h, "format": "prometheus/2"} for h in base.headers))


def draft_drops_count(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    base = loki.draft(raw, alert_context, evidence_id)
    headers = tuple({k: v for k, v in h.items() if k != "summary"} for h in base.headers)
    items = tuple(
        replace(item, forms=tuple(_COUNT.sub("", f) if isinstance(f, str) else f for f in item.forms))
        for item in base.items
    )
    return replace(base, headers=headers, items=items)
