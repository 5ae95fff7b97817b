"""Slack request signing (v0): HMAC-SHA256 of `v0:{timestamp}:{raw body}`, checked in constant time.

Returns a rejection reason instead of raising, so the HTTP layer maps each one to a 401 and a metric.
Signatures equal slack_sdk's `SignatureVerifier.generate_signature`; unlike its `is_valid`, which raises
ValueError on a timestamp that is not an integer ("abc", "²") and TypeError on a non-ASCII signature,
every malformed input here is a reason (tests/ingest/test_signature.py pins both).
"""

from __future__ import annotations

import hashlib
import hmac

VERSION = "v0"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Slack-Signature` value Slack would send for this body (also used by tests and the bench)."""
    base = f"{VERSION}:{timestamp}:".encode() + body
    return f"{VERSION}=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify(
    secret: str, timestamp: str | None, signature: str | None, body: bytes, now: float, tolerance_s: int
) -> str | None:
    """None if the request is Slack's and fresh; otherwise the reason it is not."""
    if not timestamp or not signature:
        return "missing_signature"
    # ASCII digits only: str.isdigit() also accepts "²" (which int() refuses: a 500) and "١٢٣" (which
    # int() reads as 123); Slack's timestamps are plain unix seconds.
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
        return "bad_timestamp"
    if abs(now - int(timestamp)) > tolerance_s:  # stale (a replay) or from the future
        return "stale_timestamp"
    expected = sign(secret, timestamp, body)
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", errors="replace")):
        return "bad_signature"
    return None
