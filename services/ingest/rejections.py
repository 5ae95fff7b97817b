"""The outcomes of mapping one request: a rejection (4xx) or a deliberate ignore (200)."""

from __future__ import annotations


class Rejected(Exception):
    """Bad input: answered with `status` and a JSON reason, nothing produced, counted by reason."""

    def __init__(self, status: int, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.status = status
        self.reason = reason
        self.detail = detail


class Ignored(Exception):
    """Valid input we deliberately do not record (answered 200 so Slack does not retry it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def missing(field: str) -> Rejected:
    return Rejected(400, "missing_field", field)


def bad(field: str, why: str) -> Rejected:
    return Rejected(400, "bad_field", f"{field}: {why}")
