"""The redactor: every credential's value becomes a typed marker, the line's shape and facts stay."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.boundary.redact import MARKER, redact_text, redact_value, secret_kind

# (text, the secret that must go, the marker that must take its place)
SECRETS = [
    (
        "postgres://orders_svc:S3cr3tPassw0rd@db/orders",
        "S3cr3tPassw0rd",
        "orders_svc:[REDACTED:basic-auth]@db",
    ),
    ("redis://:p4ss-w0rd!@cache:6379/0", "p4ss-w0rd!", "[REDACTED:basic-auth]@cache:6379"),
    ("conn failed password=hunter2 retry=3", "hunter2", "password=[REDACTED:password] retry=3"),
    ("DB_PASSWORD=Tr0ub4dor&3", "Tr0ub4dor", "DB_PASSWORD=[REDACTED:password]"),
    ('{"user": "svc", "passwd": "correct horse"}', "correct horse", '"passwd": "[REDACTED:password]"'),
    ("pwd: 'hunter22'", "hunter22", "pwd: '[REDACTED:password]'"),
    ("aws_access_key_id=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key]"),
    (
        "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key=[REDACTED:aws-secret-key]",
    ),
    (
        '"secretAccessKey": "abcdEFGH1234/ijklMNOP5678+qrstUVWX9012yz"',
        "abcdEFGH1234",
        "[REDACTED:secret-key]",
    ),
    (
        "posting with xoxb-2048-4096-AbCdEfGhIjKlMnOp",
        "xoxb-2048-4096-AbCdEfGhIjKlMnOp",
        "[REDACTED:slack-token]",
    ),
    ("app token xapp-1-A0B1C2D3-12345-abcdef0123456789", "xapp-1-A0B1C2D3", "[REDACTED:slack-token]"),
    (
        "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1MSJ9.c2lnbmF0dXJlX2J5dGVz",
        "c2lnbmF0dXJlX2J5dGVz",
        "Authorization: Bearer [REDACTED:bearer]",
    ),
    (
        "cookie session=eyJhbGciOiJIUzI1NiJ9.eyJ1aWQiOjQyfQ.sig_NATURE-value",
        "sig_NATURE-value",
        "[REDACTED:jwt]",
    ),
    ("proxy_authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "Basic [REDACTED:basic]"),
    ("called with bearer 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706", "bearer [REDACTED:bearer]"),
    (
        "remote https://ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/x",
        "ghp_0123",
        "[REDACTED:github-token]",
    ),
    ("GITLAB=glpat-AbCdEf0123456789xyzW", "glpat-AbCdEf0123456789xyzW", "[REDACTED:gitlab-token]"),
    (
        "client_secret=9b1c.Zx_yy-1&grant_type=client_credentials",
        "9b1c.Zx_yy-1",
        "client_secret=[REDACTED:secret]&",
    ),
    ("X-Api-Key: 5f2b8c1d9e", "5f2b8c1d9e", "X-Api-Key: [REDACTED:api-key]"),
    ("mysql -u root --password s3kr1t! -h db", "s3kr1t!", "--password [REDACTED:password] -h db"),
    (
        "GET /cb?code=1&access_token=ya29.a0AfH6SM&state=x",
        "ya29.a0AfH6SM",
        "access_token=[REDACTED:token]&state",
    ),
    ("key: OPENAI sk-proj-AbCdEfGhIjKlMnOpQrStUvWx01", "sk-proj-AbCd", "[REDACTED:openai-key]"),
    (
        "charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "[REDACTED:stripe-key]",
    ),
    (
        "hook https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "XXXXXXXXXXXXXXXX",
        "services/[REDACTED",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAB3NzaC1yc2E=\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n[REDACTED:private-key]\n[REDACTED:private-key]\n-----END",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY----- MIIEowIBAAKCAQEAtruncated",
        "MIIEowIBAAKCAQEAtruncated",
        "[REDACTED:private-key]",
    ),
]


@pytest.mark.parametrize(("text", "secret", "expected"), SECRETS)
def test_each_kind_of_secret_goes_and_its_marker_keeps_the_line(
    text: str, secret: str, expected: str
) -> None:
    out = redact_text(text)
    assert secret not in out
    assert expected in out
    assert redact_text(out) == out


# Facts that look a little like secrets: each must come through byte for byte.
FACTS = [
    "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7",
    "pod checkout-api-7d9f8b6c5-x2k4q OOMKilled (exit 137)",
    "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 pulled",
    "request_id=0f8fad5b-d9cb-469f-a165-70867728950e uid=6e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
    "x-request-id: 3fa85f6457174562b3fc2c963f66afa6",
    "deployed commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
    'payload="eyAiaGVsbG8iOiAid29ybGQiIH0=" size=24',
    "aGVsbG8gd29ybGQgdGhpcyBpcyBqdXN0IGJhc2U2NCBkYXRhIG5vdCBhIHNlY3JldA==",
    "token bucket exhausted: 0 tokens left, refill in 250ms",
    "password reset email sent to user 4412",
    "max_tokens=256 tokens=1834 token_count=12 token_expiry=3600",
    "secret_name=orders-db auth_method=oauth password_reset=true",
    "auth=ok signature=valid pass=3 fail=0 pwd=/srv/app",
    "password: missing, token: expired, secret: not found",
    'MountVolume.SetUp failed for volume "db-creds" : secret "orders-db" not found',
    "GET /api/orders?page=2&limit=50 200 12ms",
    "kube_secret_info secret=orders-db-creds namespace=shop",
    "jdbc:postgresql://db.internal:5432/orders connected",
    "keyspace=orders partition_key=c-7731 cache key miss",
    "ERROR 2026-12-04T23:01:07.123Z checkout timeout after 30000ms (attempt 3/5) upstream=10.2.3.4:8080",
]


@pytest.mark.parametrize("text", FACTS)
def test_facts_that_look_like_secrets_survive(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("db_password", "password"),
        ("PGPASSWORD", "password"),  # one word ending in a secret's name
        ("csrftoken", "token"),
        ("AWS_SECRETACCESSKEY", "aws-secret-key"),
        ("bypass", None),
        ("X-Auth-Token", "token"),
        ("clientSecret", "secret"),
        ("aws_secret_access_key", "aws-secret-key"),
        ("apiKey", "api-key"),
        ("private_key", "private-key"),
        ("token_count", None),
        ("secret_name", None),
        ("key", None),
        ("cache_key", None),
    ],
)
def test_a_key_names_a_secret_only_by_its_last_word(key: str, kind: str | None) -> None:
    assert secret_kind(key) == kind


def test_json_walk_keeps_structure_and_redacts_secret_keys_whole() -> None:
    raw: dict[str, Any] = {
        "data": {
            "result": [
                {
                    "stream": {"app": "orders", "password": "pl41n"},
                    "values": [
                        ["1733353200000000000", "conn postgres://u:pw1@db/x ok"],
                        ["1733353201000000000", "retry 2"],
                    ],
                }
            ]
        },
        "count": 2,
        "ratio": 0.5,
        "flag": True,
        "none": None,
    }
    out = redact_value(raw)
    assert out["data"]["result"][0]["stream"] == {"app": "orders", "password": "[REDACTED:password]"}
    assert out["data"]["result"][0]["values"][0] == [
        "1733353200000000000",
        "conn postgres://u:[REDACTED:basic-auth]@db/x ok",
    ]
    assert out["data"]["result"][0]["values"][1] == raw["data"]["result"][0]["values"][1]
    assert (out["count"], out["ratio"], out["flag"], out["none"]) == (2, 0.5, True, None)
    json.dumps(out)  # still JSON


@pytest.mark.parametrize("newest_first", [False, True])
def test_a_private_key_split_over_log_entries_is_redacted_in_either_order(newest_first: bool) -> None:
    lines = [
        "-----BEGIN EC PRIVATE KEY-----",
        "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oK7sH2Xp3OcvoAoGCCqGSM49",
        "AwEHoUQDQgAE7SCg8i0Z0G1rB4Oe8z1yXj4Y3ZqGQm2u1y3B2rTt2q5Fv1Wq0E9Y",
        "-----END EC PRIVATE KEY-----",
        "loaded key for tls",
    ]
    entries = [[str(1_700_000_000_000_000_000 + i), line] for i, line in enumerate(lines)]
    if newest_first:
        entries.reverse()
    out = [line for _, line in redact_value({"values": entries})["values"]]
    if newest_first:
        out.reverse()
    assert out == [lines[0], "[REDACTED:private-key]", "[REDACTED:private-key]", lines[3], lines[4]]


_words = st.text(max_size=60)
_secretish = st.sampled_from([s for s, _, _ in SECRETS] + FACTS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_words, _secretish), max_size=6).map(" ".join))
def test_redaction_is_total_and_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SECRETS), _words, _words)
def test_a_secret_is_redacted_whatever_surrounds_it(
    case: tuple[str, str, str], before: str, after: str
) -> None:
    text, secret, _ = case
    out = redact_text(f"{before} {text} {after}")
    assert secret not in out
    assert MARKER.search(out)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["hunter2", "S3cr3t!", "p@ss w0rd", "x" * 40, "Zq9_-.~+/"]), st.sampled_from(["x", "y"])
)
def test_lines_that_differ_only_in_the_secret_become_one_line(password: str, _: str) -> None:
    a = redact_text(f'level=error msg="auth failed" password="{password}" user=bob')
    b = redact_text('level=error msg="auth failed" password="other-Secret-9" user=bob')
    assert a == b


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | _words | _secretish,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(_words | st.just("password"), inner, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_json_walk_is_idempotent_and_keeps_shape(value: object) -> None:
    out = redact_value(value)
    assert redact_value(out) == out
    assert _shape(out) == _shape(value)


def _shape(value: object) -> object:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def test_the_plugin_gate_lets_through_every_line_a_plugin_anchors() -> None:
    """The one-scan gate is a superset of the per-plugin anchors: a plugin is never skipped by it."""
    from services.boundary import redact

    samples = [s for s, _, _ in SECRETS] + [
        "AccountKey=abc", "x -us7 y", "sq0csp-abc EAAAE", "1234567890:AAH_abcdefghijklmnopqrstuvwxyz012345",
        "AC0123456789abcdef0123456789abcdef", "pypi-AgEIcHlwaS5vcmc", "npm_abc _authToken", "k_live_x",
        "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAx.GabcDE.abcdefghijklmnopqrstuvwxyz0", "glpat-x", "secret = 'abc'",
    ]  # fmt: skip
    for line in samples:
        anchored = any(a.holds(line, line.lower()) for _, anchors in redact._PLUGINS for a in anchors)
        if anchored:
            assert redact._PLUGIN_GATE.search(line), line


TOKEN_SAMPLES = (
    ("jwt", "auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc"),
    ("aws-access-key", "key AKIAIOSFODNN7EXAMPLE used"),
    ("aws-access-key", "role ASIAY34FZKBOKMUTVV7A"),
    ("slack-token", "bot xoxb-1234567890-abcdefghij"),
    ("slack-token", "app xapp-1-A0B1C2D3-12345-abcdef"),
    ("slack-webhook", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXX"),
    ("github-token", "ghp_" + "a" * 36),
    ("github-token", "github_pat_" + "b" * 50),
    ("gitlab-token", "glpat-" + "c" * 20),
    ("openai-key", "sk-proj-" + "d" * 24),
    ("stripe-key", "rk_test_" + "e" * 16),
    ("google-api-key", "AIza" + "f" * 35),
    ("npm-token", "npm_" + "g" * 36),
    ("sendgrid-key", "SG." + "h" * 16 + "." + "i" * 16),
)


def test_every_token_shape_is_gated_by_its_own_literals() -> None:
    """The substring gate is derived from the token shapes' literals; a shape whose literals its
    tokens do not contain would be skipped on exactly the lines it should redact."""
    from services.boundary import redact

    for shape in redact._PREFIXED:
        lines = [line for kind, line in TOKEN_SAMPLES if kind == shape.kind and shape.pattern.search(line)]
        assert lines, f"no sample of {shape.kind} matches {shape.pattern.pattern}"
        for line in lines:
            assert any(literal in line for literal in shape.literals), (shape.kind, line)
            assert f"[REDACTED:{shape.kind}]" in redact_text(line), line


def test_a_secret_pair_inside_another_keys_value_is_redacted() -> None:
    """`A: DB_PASSWORD=...` reads first as key `A` with the value `DB_PASSWORD=...`: that value is scanned
    again (hypothesis found the pair left whole)."""
    assert redact_text("A: DB_PASSWORD=Tr0ub4dor&3") == "A: DB_PASSWORD=[REDACTED:password]&3"
    assert redact_text("host: db-1 user=bob") == "host: db-1 user=bob"
