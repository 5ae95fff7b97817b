"""tempo: headers (docs/compaction.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from services.compaction.render import clip
from services.compaction.tempo.parse import (
    _HEADER_NAME_TOKENS,
    _NAME_CHARS,
    _SERVICE_CHARS,
    _SERVICES_SHOWN,
    Span,
)
from services.compaction.tempo.render import _clip_tokens, _plural, ms
from services.compaction.timefmt import Clock


def _headers(
    spans: Sequence[Span], root: Span, roots: int, clock: Clock, evidence_id: str
) -> tuple[dict[str, Any], ...]:
    """Totals at three resolutions. The last is bounded whatever the raw: the root's name is clipped by
    tokens and every other part is a number (the evidence id is ours, at most 64 characters)."""
    per_service = Counter(s.service for s in spans)
    errors_per_service = Counter(s.service for s in spans if s.error)
    errors = sum(errors_per_service.values())
    counts = ", ".join(
        (_plural(len(spans), "span"), _plural(len(per_service), "service"), _plural(errors, "error span"))
    )
    extra = f"; {roots} roots" if roots != 1 else ""
    duration = f"{ms(root.duration)}ms"
    root_name = clip(root.name, _NAME_CHARS[0])
    summary = f"{counts}; root {clip(root.service, _SERVICE_CHARS)} {root_name} {duration}{extra}"
    terse = f"{counts}; root {_clip_tokens(root.name, _HEADER_NAME_TOKENS)} {duration}{extra}"
    ranked = sorted(per_service, key=lambda s: (-per_service[s], s))
    services = ", ".join(
        f"{clip(s, _SERVICE_CHARS)} {per_service[s]}"
        + (f" ({errors_per_service[s]} error)" if errors_per_service[s] else "")
        for s in ranked[:_SERVICES_SHOWN]
    )
    if len(ranked) > _SERVICES_SHOWN:
        services += f", +{len(ranked) - _SERVICES_SHOWN} more"
    window = clock.window()
    return (
        {"evidence": evidence_id, "summary": summary, "window": window, "services": services},
        {"evidence": evidence_id, "summary": summary, "window": window},
        {"evidence": evidence_id, "summary": terse},
    )
