"""What the thread says when a node's answer could not be used: truthful text, nothing invented.

A failed hypothesis is recorded as such (its reason and the model's text kept as raw), the judge
records that there was nothing to grade instead of grading an empty hypothesis, and the post tells
the people in the thread which step failed and where the model's text is kept.
"""

from __future__ import annotations

from datetime import datetime

from schemas.events import JudgeVerdict
from schemas.ids import parse_message_id
from services.agent.structured import Failed

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


def nothing_judged(message_id: str, round_: int, hypothesis_id: str, now: datetime) -> JudgeVerdict:
    """The judge's row when the hypothesis failed: no model asked, nothing graded, and why."""
    return _ungraded(message_id, round_, hypothesis_id, now, NO_MODEL, nothing_to_judge(hypothesis_id))


def judge_failed(
    message_id: str, round_: int, hypothesis_id: str, model: str, result: Failed, now: datetime
) -> JudgeVerdict:
    """The judge's row when its own answer never validated: the reason and its text, no grades."""
    failure = judge_failed_text(result.reason)
    return _ungraded(message_id, round_, hypothesis_id, now, model, failure, raw_answer=result.text)


def _ungraded(
    message_id: str,
    round_: int,
    hypothesis_id: str,
    now: datetime,
    model: str,
    failure: str,
    raw_answer: str | None = None,
) -> JudgeVerdict:
    """A verdict that grades nothing (grounded False), with why."""
    return JudgeVerdict(
        thread_ts=parse_message_id(message_id)[0],
        message_id=message_id,
        event_time=now,
        round=round_,
        grounded=False,
        hypothesis_id=hypothesis_id,
        model=model,
        failure=failure,
        raw_answer=raw_answer,
    )
