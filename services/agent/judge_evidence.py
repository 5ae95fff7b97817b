"""What the judge checks in a claim, and how its grades are recorded: pure functions.

Apart from the graph so that they can be tested without a model. What the judge is shown of the
evidence is services/context_render/judge_input.py (the review page rebuilds it).
"""

from __future__ import annotations

import re
from typing import Any

from services.agent.round_state import ClaimDraft

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def claim_numbers(claim: ClaimDraft) -> list[str]:
    """The numbers a claim states, each once: the judge is told which of them its evidence lacks."""
    return sorted(set(NUMBER.findall(claim["text"])))


def terse_grades(graded: Any, claims: list[ClaimDraft]) -> list[dict[str, Any]]:
    """The judge's grades as recorded: claim by index, a reason only for a failure.

    A grade that names its claim by text (a model that ignored the format) is mapped to the
    claim's index when the text matches one; otherwise it is kept as the model gave it.
    """
    texts = {str(c.get("text")): k for k, c in enumerate(claims)}
    out: list[dict[str, Any]] = []
    for g in graded if isinstance(graded, list) else []:
        if not isinstance(g, dict):
            continue
        claim = g.get("claim")
        if isinstance(claim, str) and claim in texts:
            claim = texts[claim]
        grounded = bool(g.get("grounded"))
        grade: dict[str, Any] = {"claim": claim, "grounded": grounded}
        if not grounded and g.get("reason"):
            grade["reason"] = str(g["reason"])
        out.append(grade)
    return out
