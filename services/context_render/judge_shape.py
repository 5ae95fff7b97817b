"""The judge's input shaped within its budget (invariant 10), not only checked. Pure.

The judge is sent the hypothesis and the evidence its claims cite. On a war room a hypothesis can cite
many long rows (human turns, digests), and their sum can pass the judge model's input budget. Then the
evidence is shown the way a long turn is (services/boundary/clip.py): each digest over an equal share of
the room left is cut to its head and tail with a counted pointer to `get_evidence(id)`, the shares
shrinking until the whole input fits; if even that is not enough (a hypothesis citing hundreds of ids),
the last cited ids are listed under `evidence_not_shown`. The hypothesis itself (its summary, claims,
evidence ids) and the raw checks are never cut: they are what is judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import SystemMessage

from schemas.tokens import count_tokens, render_for_model
from services.boundary.clip import MARKER_TOKENS, clip_text
from services.context_render import prompts
from services.context_render.context import message_tokens
from services.context_render.judge_input import judge_message

MIN_SHARE = MARKER_TOKENS + 24  # below this a clipped digest is only its pointer: leave it out instead


def shape_judge_payload(
    payload: dict[str, Any], budget: int, measure: Callable[[dict[str, Any]], int]
) -> dict[str, Any]:
    """`payload` when `measure(payload)` (the judge's whole input) is within `budget`; else the payload
    with its evidence clipped, then its last evidence left out and named, until it is. Should even the
    hypothesis alone not fit, every id is named and the call's own guard reports the overrun."""
    if measure(payload) <= budget:
        return payload
    evidence: dict[str, Any] = dict(payload.get("evidence") or {})
    ids = list(evidence)
    sizes = {i: count_tokens(render_for_model(evidence[i])) for i in ids}
    kept = len(ids)
    while kept > 0:
        room = budget - measure(_with(payload, {}, ids[kept:]))
        if room >= kept * MIN_SHARE:
            break
        kept = min(kept - 1, max(room, 0) // MIN_SHARE)
    room = budget - measure(_with(payload, {}, ids[kept:]))
    while kept > 0 and room >= kept * MIN_SHARE:
        shares = _water_fill([sizes[i] for i in ids[:kept]], room)
        shaped = _with(
            payload,
            {i: _clipped(i, evidence[i], sh) for i, sh in zip(ids[:kept], shares, strict=True)},
            ids[kept:],
        )
        if measure(shaped) <= budget:
            return shaped
        room = room * 7 // 8  # the JSON around each clipped text costs a little more than counted
    return _with(payload, {}, ids)


def _water_fill(sizes: list[int], room: int) -> list[int]:
    """Each entry's share of `room`: the small ones whole, the rest an equal share of what is left."""
    order = sorted(range(len(sizes)), key=lambda k: sizes[k])
    shares = [0] * len(sizes)
    left, count = room, len(sizes)
    for k in order:
        fair = left // count
        shares[k] = min(sizes[k], fair)
        left -= shares[k]
        count -= 1
    return shares


def _with(payload: dict[str, Any], evidence: dict[str, Any], not_shown: list[str]) -> dict[str, Any]:
    out = {**payload, "evidence": evidence}
    if not_shown:
        out["evidence_not_shown"] = not_shown
    return out


def _clipped(evidence_id: str, entry: Any, share: int) -> Any:
    """An evidence entry within `share` tokens: whole when it is, else its digest's text clipped."""
    if count_tokens(render_for_model(entry)) <= share:
        return entry
    digest: Any = entry.get("digest") if isinstance(entry, dict) else entry
    clipped_text = isinstance(digest, dict) and isinstance(digest.get("text"), str)
    body = str(digest["text"]) if clipped_text else render_for_model(digest)
    clipped = clip_text(body, max(share - 24, 2), evidence_id)
    new_digest: Any = {**digest, "text": clipped} if clipped_text else clipped
    return {**entry, "digest": new_digest} if isinstance(entry, dict) else new_digest


def judge_input_tokens(payload: dict[str, Any]) -> int:
    """The judge call's whole input for `payload`, counted as the call counts it (prompt and framed data)."""
    return message_tokens([SystemMessage(content=prompts.JUDGE), judge_message(payload)])
