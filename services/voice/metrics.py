"""The poster's failure counter: what `SlackPosterCannotPost` alerts on (deploy/monitoring/).

The label is Slack's own error code from a closed set (a value from Slack's answer could otherwise
grow /metrics without bound); anything else is `other`, a transport failure `unreachable`.
"""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

from services.runtime.metric_families import Families

KNOWN_ERRORS = frozenset(
    {
        "invalid_auth",
        "token_revoked",
        "token_expired",
        "account_inactive",
        "not_authed",
        "missing_scope",
        "channel_not_found",
        "thread_not_found",
        "invalid_thread_ts",
        "not_in_channel",
        "is_archived",
        "msg_too_long",
        "invalid_blocks",
        "ratelimited",
        "fatal_error",
        "internal_error",
        "service_unavailable",
        "request_timeout",
    }
)

# every error label at 0 from the start: the first failure of a kind is then an increase() (the alert)
POST_FAILURES = Families().counter(
    "slack_post_failures_total",
    "chat.postMessage calls that failed after slack_sdk's retries, by Slack's error code",
    "error",
    zero=(*KNOWN_ERRORS, "other", "unreachable"),
)


def failure_label(exc: BaseException) -> str:
    """Slack's error code when it is a known one, `other` for any other answer, `unreachable` when
    Slack did not answer at all (connection refused, DNS, timeout)."""
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error") if exc.response is not None else None
        return error if isinstance(error, str) and error in KNOWN_ERRORS else "other"
    return "unreachable"
