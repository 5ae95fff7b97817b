"""Slack v0 request signing: the checks every request passes before anything else."""

from __future__ import annotations

import hashlib
import hmac

from services.ingest.slack_signature import sign, verify

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BODY = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"


def test_signature_is_v0_hmac_sha256_of_version_timestamp_body() -> None:
    base = b"v0:1531420618:" + BODY
    expected = "v0=" + hmac.new(SECRET.encode(), base, hashlib.sha256).hexdigest()
    assert sign(SECRET, "1531420618", BODY) == expected
    assert sign(SECRET, "1531420619", BODY) != expected  # the timestamp is signed too


def test_fresh_and_signed_passes() -> None:
    assert verify(SECRET, "1531420618", sign(SECRET, "1531420618", BODY), BODY, 1531420618 + 299, 300) is None


def test_each_failure_has_its_reason() -> None:
    good = sign(SECRET, "1531420618", BODY)
    now = 1531420618.0
    assert verify(SECRET, None, good, BODY, now, 300) == "missing_signature"
    assert verify(SECRET, "1531420618", None, BODY, now, 300) == "missing_signature"
    assert verify(SECRET, "15314x0618", good, BODY, now, 300) == "bad_timestamp"
    assert verify(SECRET, "1531420618", good, BODY, now + 301, 300) == "stale_timestamp"
    assert verify(SECRET, "1531420618", good, BODY, now - 301, 300) == "stale_timestamp"  # from the future
    assert verify(SECRET, "1531420618", good, BODY + b" ", now, 300) == "bad_signature"
    assert verify("another-secret", "1531420618", good, BODY, now, 300) == "bad_signature"
    assert verify(SECRET, "1531420618", good.replace("v0=", "v1="), BODY, now, 300) == "bad_signature"
    assert verify(SECRET, "1531420618", "v0=ünïcode", BODY, now, 300) == "bad_signature"
