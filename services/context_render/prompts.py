"""The instructions of each graph node, and the JSON shapes the models must answer with.

The same texts go to ChatOpenAI and to the local deterministic model; the local
model reads the `TASK:` line to know which node it is serving.
"""

from __future__ import annotations

import json
import re
from typing import Any

from services.boundary.framing import PREAMBLE_RULE

INVESTIGATE = (
    "TASK: investigate\n"
    "Call the telemetry tools you need to explain the alert, inside the alert window only. "
    "When the evidence in the thread is enough, answer without tool calls, listing the evidence ids."
)
HYPOTHESIS = (
    "TASK: hypothesis\n"
    'Answer with JSON only: {"summary": str, "claims": [{"text": str, "evidence_ids": [str]}]}. '
    "Be terse: one short claim per fact; do not restate what the judge already graded. Every claim "
    "cites the evidence ids (tool results or human messages) it rests on, and copies numbers and "
    "timestamps exactly as they appear there."
)
JUDGE = (
    "TASK: judge\n"
    "Grade each claim of the hypothesis against the evidence given (compact digests, and the raw "
    "checks done through get_evidence). A claim about a cause needs the request path (a trace) and "
    "what changed (from the people in the thread). Answer with JSON only: "
    '{"grounded": bool, "graded_claims": [{"claim": int, "grounded": bool, "reason": str}], '
    '"questions": [str]}. `claim` is the claim\'s index in the input; give `reason` only for a claim '
    "that is not grounded. When not grounded, ask at most 2 specific questions.\n" + PREAMBLE_RULE
)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_json_answer(text: str) -> dict[str, Any]:
    """The JSON object of a model's answer, tolerating a code fence or prose around it."""
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        raise ValueError(f"model answer holds no JSON object: {text[:120]!r}")
    value = json.loads(candidate[start : end + 1])
    if not isinstance(value, dict):
        raise ValueError("model answer is not a JSON object")
    return value
