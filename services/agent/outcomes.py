"""What the thread says when a node's answer could not be used: truthful text, nothing invented.

A failed hypothesis is recorded as such (its reason and the model's text kept as raw), the judge
records that there was nothing to grade instead of grading an empty hypothesis, and the post tells
the people in the thread which step failed and where the model's text is kept.
"""

from __future__ import annotations

NO_MODEL = "none (nothing to grade; no model was asked)"
_REASON_CHARS = 300


def clip(reason: str, width: int = _REASON_CHARS) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= width else reason[: width - 1] + "…"


def hypothesis_failed_text(reason: str) -> str:
    return f"hypothesis failed: {clip(reason)}"


def nothing_to_judge(hypothesis_id: str) -> str:
    return f"nothing to judge: the hypothesis {hypothesis_id} failed"


def judge_failed_text(reason: str) -> str:
    return f"judge failed: {clip(reason)}"


def failure_post(hypothesis_id: str, hypothesis_failure: str | None, judge_failure: str | None) -> str:
    """The post of a round whose hypothesis or judge failed: what happened, and where to look."""
    if hypothesis_failure:
        return (
            "I could not form a hypothesis this round: the model's answer could not be used "
            f"({clip(hypothesis_failure)}). Its text is kept in {hypothesis_id}. Mention me to try again."
        )
    return (
        f"The judge's answer could not be used ({clip(judge_failure or 'unknown')}), so the hypothesis "
        f"{hypothesis_id} is ungraded and I am not posting it as a conclusion. Mention me to try again."
    )
