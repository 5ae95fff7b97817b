"""Slack v0 request signing: the checks every request passes before anything else, and how they
compare with slack_sdk's `SignatureVerifier` (same signatures; reasons where slack_sdk raises)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from slack_sdk.signature import Clock, SignatureVerifier

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


# --- against slack_sdk's own verifier ---------------------------------------------------------------

BODIES = [
    BODY,
    b"",
    b'{"type":"event_callback","event":{"type":"message","text":"caf\xc3\xa9 \xe2\x9c\x85 <@U0LAN0Z89>"}}',
    b'{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV","type":"url_verification"}',
    b"payload=%7B%22type%22%3A%22block_actions%22%7D",
    b'line one\nline two\r\n\ttabbed \\ backslash "quoted"',
    b"x" * 70_000,
]


class FixedClock(Clock):
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


@pytest.mark.parametrize("body", BODIES, ids=[f"body{i}" for i in range(len(BODIES))])
@pytest.mark.parametrize("timestamp", ["1531420618", "1700000000", "0"])
def test_signatures_equal_slack_sdk(body: bytes, timestamp: str) -> None:
    ours = sign(SECRET, timestamp, body)
    theirs = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body)
    assert ours == theirs
    now = int(timestamp) + 120
    # Each verifier accepts the other's signature, and both refuse a tampered body the same way.
    assert SignatureVerifier(SECRET, FixedClock(now)).is_valid(body, timestamp, ours) is True
    assert verify(SECRET, timestamp, theirs, body, now, 300) is None
    assert SignatureVerifier(SECRET, FixedClock(now)).is_valid(body + b"!", timestamp, ours) is False
    assert verify(SECRET, timestamp, theirs, body + b"!", now, 300) == "bad_signature"
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": ours}
    assert SignatureVerifier(SECRET, FixedClock(now)).is_valid_request(body, headers) is True


def test_staleness_window_agrees_with_slack_sdk() -> None:
    """Both use 5 minutes either way (ours: `tolerance_s`, 300 in production)."""
    good = sign(SECRET, "1531420618", BODY)
    for delta, fresh in [(299, True), (300, True), (301, False), (-300, True), (-301, False)]:
        now = 1531420618 + delta
        assert SignatureVerifier(SECRET, FixedClock(now)).is_valid(BODY, "1531420618", good) is fresh
        assert (verify(SECRET, "1531420618", good, BODY, now, 300) is None) is fresh


@pytest.mark.parametrize("timestamp", ["²", "abc", "1531420618.5", "", "¹⁵³¹⁴²⁰⁶¹⁸"])
def test_a_non_numeric_timestamp_is_a_reason_where_slack_sdk_raises(timestamp: str) -> None:
    """slack_sdk's `is_valid` runs `int(timestamp)`: ValueError for each of these (an unhandled 500
    in a server that calls it). Ours answers with a reason, and never calls int() on them."""
    signature = sign(SECRET, timestamp, BODY)
    expected = "missing_signature" if timestamp == "" else "bad_timestamp"
    assert verify(SECRET, timestamp, signature, BODY, 1531420618.0, 300) == expected
    with pytest.raises(ValueError):
        SignatureVerifier(SECRET, FixedClock(1531420618)).is_valid(BODY, timestamp, signature)


def test_digits_that_are_not_ascii_are_a_bad_timestamp() -> None:
    """`"١٢٣".isdigit()` is True and int() reads it as 123: slack_sdk takes it for a (stale) number,
    returning False; ours refuses it before arithmetic, as a bad timestamp."""
    arabic_indic = "١٥٣١٤٢٠٦١٨"  # 1531420618 in Arabic-Indic digits
    signature = sign(SECRET, arabic_indic, BODY)
    now = 1531420618.0
    assert verify(SECRET, arabic_indic, signature, BODY, now, 300) == "bad_timestamp"
    # slack_sdk reads it as the current time and accepts the request signed over the non-ASCII string.
    assert SignatureVerifier(SECRET, FixedClock(now)).is_valid(BODY, arabic_indic, signature) is True


def test_malformed_signature_and_body_are_reasons_where_slack_sdk_raises() -> None:
    now = 1531420618
    # A non-ASCII signature: hmac.compare_digest on str raises TypeError inside slack_sdk.
    with pytest.raises(TypeError):
        SignatureVerifier(SECRET, FixedClock(now)).is_valid(BODY, str(now), "v0=ünïcode")
    assert verify(SECRET, str(now), "v0=ünïcode", BODY, now, 300) == "bad_signature"
    # A body that is not UTF-8: slack_sdk decodes it first (UnicodeDecodeError); we sign the raw bytes.
    raw = b"\xff\xfe not utf-8"
    with pytest.raises(UnicodeDecodeError):
        SignatureVerifier(SECRET).generate_signature(timestamp=str(now), body=raw)
    assert verify(SECRET, str(now), sign(SECRET, str(now), raw), raw, now, 300) is None
    # A missing header: both refuse without raising.
    assert SignatureVerifier(SECRET, FixedClock(now)).is_valid(BODY, None, "v0=x") is False
    assert verify(SECRET, None, "v0=x", BODY, now, 300) == "missing_signature"
