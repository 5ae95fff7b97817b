"""passthrough: any JSON, kept whole when it fits, else truncated with an explicit marker.

The marker names the evidence id, so the model knows the rest exists and how to get it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compaction.model import Draft

TOOL = "passthrough"


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    text = raw if isinstance(raw, str) else canonical_json(raw)
    header = {"evidence": evidence_id, "value": raw}

    def truncated(budget: int) -> dict[str, Any]:
        marker = f" …[cut at {{cut}} of {len(text)} chars]"

        def build(cut: int) -> dict[str, Any]:
            return {"evidence": evidence_id, "truncated": text[:cut] + marker.format(cut=cut)}

        lo, hi = 0, len(text)
        while lo < hi:  # the longest prefix that fits
            mid = (lo + hi + 1) // 2
            if count_value_tokens(build(mid)) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return build(lo)

    return Draft(
        headers=(header,), section="value", kind="values", unit="values", items=(), fallback=truncated
    )
