"""The one redactor: credentials become typed markers that keep the line's shape.

`redact_text("password=hunter2 user=bob")` is `"password=[REDACTED:password] user=bob"`: the
value goes, the key and the rest of the line stay, so two log lines that differ only in the
secret still group into one pattern, and every count, time and id around it survives.

Two layers, in this order, over each string:
1. This module's own rules, for the shapes Yelp's detect-secrets misses or cuts short on log lines
   (docs/redaction.md): whole PEM key blocks and their body lines, whole JWTs (its detector stops
   before the signature), the password of a URL's userinfo (keeping the user), `Authorization`
   headers and bearer tokens, well-known token prefixes (AWS, Slack, GitHub, GitLab, OpenAI,
   Stripe, Google, npm, SendGrid) and `key=value` / `"key": "value"` / `key: value` / `--key value`
   where the key names a secret (quoted or not).
2. detect-secrets' typed plugins (never its entropy plugins, which flag trace ids, pod names and
   digests, nor its public-IP one: those are facts), run straight on the line through
   `analyze_string`, so no verification call can reach the network. A cheap trigger decides first:
   a line with none of the plugins' anchors skips them (their regexes cost far more than the trigger;
   benchmarks/bench_redaction.py).

Total, pure and deterministic; idempotent (`redact_text(redact_text(x)) == redact_text(x)`): a
marker is never matched again. `redact_value` walks JSON values, keeping their structure: a string
value under a key that names a secret becomes a marker whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

# A redactor version: part of the compactor version (services/compaction/config.py), so a replay with
# a changed rule re-derives, never reuses, what the model saw.
REDACTOR_VERSION = "3"  # 2: a brace after a space no longer spares the value before it; 3: the value of a
# key that names no secret is scanned again for a pair that does (`A: DB_PASSWORD=...`)

MARKER_PREFIX = "[REDACTED:"
MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


# --- which key names a secret -------------------------------------------------------------------

_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "passcode", "pw"})
_KEY_QUALIFIERS = frozenset(
    {
        "api", "access", "secret", "private", "signing", "encryption", "master", "account", "client",
        "app", "auth", "service", "session", "storage", "shared", "license", "webhook", "subscription",
        "consumer", "hmac", "sas", "deploy", "ssh",
    }
)  # fmt: skip
_JOINED_SUFFIX = re.compile(
    r"(?:password|passwd|passphrase|secret|token|apikey|accesskey|secretkey|privatekey)$"
)
_COMPONENTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


@lru_cache(maxsize=4096)
def secret_kind(key: str) -> str | None:
    """The marker type for a key that names a secret (`db_password` -> password), else None.

    The secret word must be the key's LAST component: `client_secret` and `X-Auth-Token` name a
    secret, `token_count`, `secret_name` and `password_reset` name a fact about one."""
    parts: list[str] = [p.lower() for p in _COMPONENTS.findall(key)]
    if not parts:
        return None
    last, before = parts[-1], parts[:-1]
    joined = _JOINED_SUFFIX.search(last)  # one word of several: PGPASSWORD, dbtoken, clientsecret
    if joined is not None and joined.start() > 0:
        last, before = joined.group(), [*before, last[: joined.start()]]
    if last in (
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
    ):  # secretAccesskey: ..., secret, access, key
        last, before = "key", [*before, last[:-3]]
    if last in _PASSWORD_WORDS:
        return "password"
    if last in ("secret", "secrets"):
        return "aws-secret-key" if "aws" in before else "secret"
    if last == "token":
        return "token"
    if last in ("credentials", "credential", "creds"):
        return "credentials"
    if last == "auth":
        return "auth"
    if last in ("signature", "sig"):
        return "signature"
    if last in ("key", "keys") and before and before[-1] in _KEY_QUALIFIERS:
        if "secret" in before:
            return "aws-secret-key" if "aws" in before else "secret-key"
        return "api-key" if before[-1] == "api" else f"{before[-1]}-key"
    return None


# Values that say something about a secret rather than being one ("password: missing").
_NOT_SECRETS = frozenset(
    {
        "", "true", "false", "null", "none", "nil", "yes", "no", "ok", "on", "off", "not", "is", "was",
        "the", "a", "an", "missing", "expired", "invalid", "required", "empty", "failed", "failure",
        "rejected", "denied", "set", "unset", "found", "provided", "changed", "updated", "reset",
        "error", "mismatch", "incorrect", "wrong", "valid", "present", "absent", "redacted", "hidden",
        "masked", "n/a", "-", "undefined", "unknown", "success", "succeeded", "ignored", "disabled",
        "enabled", "refreshed", "rotated", "revoked", "accepted", "verified", "none)", "<none>",
    }
)  # fmt: skip
_OBJECT_REF = re.compile(r"[A-Za-z_$][\w$]*(?:\.[\w$]+)+@[0-9a-f]{4,16}")
_PLAIN_WORD = re.compile(r"[a-z]{1,12}")
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _is_secret_value(kind: str, key: str, value: str) -> bool:
    """False for a value that cannot be the secret: a state word, a mask, a path for `pwd`, a plain
    method word for `auth`/`signature`, a count for `pass`, a Kubernetes Secret's name for `secret`."""
    bare = value.strip().lower()
    if bare in _NOT_SECRETS or set(bare) <= {"*", "."} or MARKER.fullmatch(value.strip()):
        return False
    lowered = key.lower()
    if kind == "password" and lowered.endswith("pwd") and bare.startswith(("/", "~")):
        return False  # the shell's working directory
    if kind == "password" and lowered.endswith("pass") and bare.isdigit():
        return False  # pass=3 fail=0
    if _OBJECT_REF.fullmatch(value.strip()):
        return False  # android.os.BinderProxy@2bd79ce: an object's identity, printed
    if kind in ("auth", "signature") and _PLAIN_WORD.fullmatch(bare):
        return False  # auth=oauth, signature=valid
    return not (lowered == "secret" and "-" in bare and _K8S_NAME.fullmatch(value) is not None)


# --- the rules over text ------------------------------------------------------------------------

Rule = Callable[[str], str]

_PEM_BLOCK = re.compile(
    r"(?P<begin>-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----)(?P<body>.*?)"
    r"(?P<end>-----END (?P=label)-----|\Z)",
    re.DOTALL,
)
_PEM_END_ONLY = re.compile(
    r"\A(?P<body>.*?)(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)", re.DOTALL
)
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}|[A-Za-z0-9+/]{4,}={0,2}|Proc-Type:.*|DEK-Info:.*")
_SSH_KEY_BODY = re.compile(r"(?i)(PuTTY-User-Key-File-\d+:.*|Private-Lines:\s*\d+)")


def _pem_body(body: str) -> str:
    """Every non-empty line of a key's body becomes one marker; line breaks (the shape) are kept."""
    return re.sub(r"[^\r\n]+", lambda m: marker("private-key") if m.group().strip() else m.group(), body)


def _pem(text: str) -> str:
    if "PRIVATE KEY" not in text:
        return text
    if "-----BEGIN" not in text.split("-----END", 1)[0]:  # a block cut before its start (newest first)
        text = _PEM_END_ONLY.sub(lambda m: _pem_body(m["body"]) + m["end"], text, count=1)
    return _PEM_BLOCK.sub(lambda m: m["begin"] + _pem_body(m["body"]) + m["end"], text)


_URL_USERINFO = re.compile(
    r"(?P<lead>\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/?#@\[\]\"'<>]*:)(?P<pw>[^\s@/?#\"'<>]+)(?=@)"
)


def _url_password(text: str) -> str:
    if "://" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        if MARKER.fullmatch(m["pw"]):
            return m.group()
        return m["lead"] + marker("basic-auth")

    return _URL_USERINFO.sub(one, text)


_AUTH_HEADER = re.compile(
    r"(?i)(?P<lead>(?<![a-z0-9])(?:[a-z_-]*[-_])?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|negotiate|apikey|sso-key|aws4-hmac-sha256|ntlm)[ \t]+)?+)"
    r"(?P<value>(?!\[REDACTED:)[^\s\"',;]+(?:[ \t]*,[ \t]*[A-Za-z]+=[^\s\"',;]+)*)"
)
_BEARER = re.compile(r"(?i)(?P<lead>\bbearer[ \t]+)(?P<value>(?!\[REDACTED:)[A-Za-z0-9\-._~+/]{12,}=*)")


def _authorization(text: str) -> str:
    lowered = text.lower()
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(lambda m: m["lead"] + marker((m["scheme"] or "auth").lower()), text)
    if "bearer" in lowered:

        def one(m: re.Match[str]) -> str:
            value = m["value"]
            looks_like_token = any(c.isdigit() for c in value) or not value.isalpha()
            return m["lead"] + marker("bearer") if looks_like_token else m.group()

        text = _BEARER.sub(one, text)
    return text


@dataclass(frozen=True)
class _TokenShape:
    """A well-known token shape: the whole token goes (its prefix is its type, not a fact). Every
    such token contains one of `literals`; a line holding none of any shape's skips their regexes
    (substring tests, at C speed), so the gate is derived from the very rules it guards."""

    kind: str
    literals: tuple[str, ...]
    pattern: re.Pattern[str]


def _token(kind: str, literals: tuple[str, ...], pattern: str) -> _TokenShape:
    return _TokenShape(kind, literals, re.compile(pattern))


_PREFIXED: tuple[_TokenShape, ...] = (
    _token("jwt", ("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    _token("aws-access-key", ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "A3T"),
           r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
    _token("slack-token", ("xox",), r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
    _token("slack-token", ("xapp-",), r"\bxapp-\d-[A-Za-z0-9-]{10,}"),
    _token("slack-webhook", ("hooks.slack",), r"(?<=hooks\.slack\.com/services/)[A-Za-z0-9/_-]{20,}"),
    _token("github-token", ("gh", "github_pat_"), r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    _token("gitlab-token", ("gl",), r"\bgl(?:pat|dt|rt|ptt|ft|imt|agent|oas|cbt|soat)-[A-Za-z0-9_-]{20,}"),
    _token("openai-key", ("sk-",), r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    _token("stripe-key", ("k_live_", "k_test_"), r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    _token("google-api-key", ("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),
    _token("npm-token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}"),
    _token("sendgrid-key", ("SG.",), r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
)  # fmt: skip
_PREFIX_LITERALS = tuple(literal for shape in _PREFIXED for literal in shape.literals)


def _prefixed(text: str) -> str:
    if not any(literal in text for literal in _PREFIX_LITERALS):
        return text
    for shape in _PREFIXED:
        text = shape.pattern.sub(marker(shape.kind), text)
    return text


_KEY = r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}+"  # possessive: a key is never given back char by char
_VALUE = r"(?P<val>\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|(?!\[REDACTED:)[^\s,;&\"'<>()\[\]{}|]+)"
_KEY_VALUE = re.compile(
    rf"(?P<lead>(?<![A-Za-z0-9_.\-])(?P<q>[\"']?)(?P<key>{_KEY})(?P=q)[ \t]*(?::=|=>|=|:)[ \t]*){_VALUE}"
)
_FLAG_VALUE = re.compile(rf"(?P<lead>(?<!\S)--?(?P<key>{_KEY})[ \t]+){_VALUE}")
_KEYWORD_STEMS = ("pass", "pwd", "pw", "secret", "token", "key", "auth", "cred", "sig")


def _has_stem(text: str) -> bool:
    lowered = text.lower()
    return any(stem in lowered for stem in _KEYWORD_STEMS)


def _keyword_values(text: str) -> str:
    if not _has_stem(text):
        return text

    def one(m: re.Match[str]) -> str:
        key, value = m["key"], m["val"]
        if not _has_stem(key):  # most keys of a log line name no secret; its value may hold a pair that
            return m["lead"] + _KEY_VALUE.sub(one, value)  # does (`A: DB_PASSWORD=...`): scanned again
        kind = secret_kind(key)
        quoted = value[:1] in ("'", '"') and len(value) >= 2
        inner = value[1:-1] if quoted else value
        if kind is None or key.lower().endswith("authorization"):
            return m.group()
        if m.groupdict().get("q") and not quoted:  # `"key": word` is prose, JSON quotes both
            return m.group()
        if not _is_secret_value(kind, key, inner):
            return m.group()
        if not quoted and m.string[m.end() : m.end() + 1] in ("{", "("):
            return m.group()  # `token=Token{a64f992 ...}`: an object's printed form, not a value (a
            # brace after a space is the next word, as in `key=value {`)
        return m["lead"] + (value[0] + marker(kind) + value[0] if quoted else marker(kind))

    return _FLAG_VALUE.sub(one, _KEY_VALUE.sub(one, text))


# --- detect-secrets' typed plugins --------------------------------------------------------------


@dataclass(frozen=True)
class _Anchor:
    """What a plugin cannot match without: one of `literals` in the line (in its lower case when
    `lower`), then `pattern` when given. Substring tests run at C speed; a plugin's own regexes cost up
    to milliseconds a line (benchmarks/bench_redaction.py), so a line runs only the plugins it anchors."""

    literals: tuple[str, ...]
    lower: bool = False
    pattern: re.Pattern[str] | None = None

    def holds(self, line: str, lowered: str) -> bool:
        text = lowered if self.lower else line
        if not any(literal in text for literal in self.literals):
            return False
        return self.pattern is None or self.pattern.search(line) is not None


_AWS_PREFIXES = ("AKIA", "ASIA", "A3T", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA")
_PLUGINS: tuple[tuple[BasePlugin, tuple[_Anchor, ...]], ...] = (
    (AWSKeyDetector(), (_Anchor(_AWS_PREFIXES), _Anchor(("aws",), lower=True))),
    (AzureStorageKeyDetector(), (_Anchor(("accountkey",), lower=True),)),
    (BasicAuthDetector(), (_Anchor(("://",), pattern=re.compile(r"://[^\s/]*@")),)),
    (DiscordBotTokenDetector(), (_Anchor((".",), pattern=re.compile(r"[MNO][\w-]{23,25}\.[\w-]{6}\.")),)),
    (GitHubTokenDetector(), (_Anchor(("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),)),
    (GitLabTokenDetector(), (_Anchor(("gl",), pattern=re.compile(r"gl[a-z]{1,6}-")),)),
    (JwtTokenDetector(), (_Anchor(("eyJ",)),)),
    (
        KeywordDetector(),  # its denylist's words, then an assignment and a quote (this mode needs quotes)
        (
            _Anchor(
                ("pass", "pwd", "secret", "contras", "key"),
                lower=True,
                pattern=re.compile(
                    r"(?i)(?:pass|pwd|secret|contras|key)[\w.-]*[\"']?\s*(?::=|=>|==|!=|[:=])\s*[@\[(]?\s*[\"'`]"
                ),
            ),
        ),
    ),
    (MailchimpDetector(), (_Anchor(("-us",), pattern=re.compile(r"-us\d")),)),
    (NpmDetector(), (_Anchor(("npm_", "_authToken")),)),
    (OpenAIDetector(), (_Anchor(("sk-",)),)),
    (PypiTokenDetector(), (_Anchor(("pypi-",)),)),
    (SendGridDetector(), (_Anchor(("SG.",)),)),
    (SlackDetector(), (_Anchor(("xox", "hooks.slack")),)),
    (SquareOAuthDetector(), (_Anchor(("sq0", "EAAA")),)),
    (StripeDetector(), (_Anchor(("k_live_",)),)),
    (TelegramBotTokenDetector(), (_Anchor((":",), pattern=re.compile(r"\d{8,10}:[\w-]{35}")),)),
    (TwilioKeyDetector(), (_Anchor(("AC", "SK"), pattern=re.compile(r"(?:AC|SK)[a-z0-9]{32}")),)),
)
_TYPE_NAMES = {
    "Secret Keyword": "secret",
    "Basic Auth Credentials": "basic-auth",
    "JSON Web Token": "jwt",
    "AWS Access Key": "aws-access-key",
    "Slack Token": "slack-token",
    "GitHub Token": "github-token",
    "GitLab Token": "gitlab-token",
    "Azure Storage Account access key": "azure-storage-key",
}
_MIN_DETECTED = 6  # shorter values are left to the key=value rule: replacing "abc" everywhere eats facts


def _type_name(secret_type: str) -> str:
    known = _TYPE_NAMES.get(secret_type)
    return known or re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


# One scan that every anchor above implies: most lines fail it and skip the per-plugin checks.
_PLUGIN_GATE = re.compile(
    r"(?i:aws|accountkey|pass|pwd|secret|contras|key)|A(?:KIA|SIA|3T|GPA|IDA|ROA|IPA|NPA|NVA)|://[^\s/]*@"
    r"|[MNO][\w-]{23,25}\.[\w-]{6}\.|gh[pousr]_|github_pat_|gl[a-z]{1,6}-|eyJ|-us\d|npm_|_authToken|sk-"
    r"|pypi-|SG\.|xox|hooks\.slack|sq0|EAAA|k_live_|\d{8,10}:[\w-]{35}|(?:AC|SK)[a-z0-9]{32}"
)


def _plugin_findings(line: str) -> Iterator[tuple[str, str]]:
    if _PLUGIN_GATE.search(line) is None:
        return
    lowered = line.lower()
    for plugin, anchors in _PLUGINS:
        if not any(anchor.holds(line, lowered) for anchor in anchors):
            continue
        if isinstance(plugin, KeywordDetector):
            found: Iterable[str] = plugin.analyze_string(
                line, denylist_regex_to_group=QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
            )
        else:
            found = plugin.analyze_string(line)
        for value in found:
            yield _type_name(plugin.secret_type), value


def _detect_secrets(text: str) -> str:
    for line in set(text.splitlines()):
        for kind, value in _plugin_findings(line):
            if len(value) < _MIN_DETECTED or MARKER_PREFIX[1:] in value or MARKER.search(value):
                continue
            bounded = re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
            text = bounded.sub(marker(kind), text)
    return text


_RULES: tuple[Rule, ...] = (_pem, _url_password, _authorization, _prefixed, _keyword_values, _detect_secrets)


_CACHED_CHARS = 2048  # log lines repeat across results and are short; a long paste is not kept in memory


def redact_text(text: str) -> str:
    """`text` with every credential's value replaced by a typed marker; unchanged when it holds none."""
    return _redact_line(text) if len(text) <= _CACHED_CHARS else redact_uncached(text)


def redact_uncached(text: str) -> str:
    """`redact_text` without its cache (what a benchmark of every line seen anew times)."""
    for rule in _RULES:
        text = rule(text)
    return text


_redact_line = lru_cache(maxsize=65_536)(redact_uncached)


def redact_value(value: Any) -> Any:
    """A JSON value with every string redacted, its structure kept: same keys, same lengths, same types.

    A string under a key that names a secret becomes its marker whole. Lines of a PEM key that a log
    splits across entries are found by `_PemRun`, in document order either way (oldest or newest
    first)."""
    return _walk(value, None, _PemRun())


class _PemRun:
    """Whether the strings walked so far are inside a private key's body (BEGIN seen, END not yet, or
    the reverse for a newest-first answer)."""

    def __init__(self) -> None:
        self.inside = False

    def step(self, text: str) -> str:
        if "PRIVATE KEY-----" in text:
            if ("-----BEGIN" in text) != ("-----END" in text):  # one edge: enter, or leave, the body
                self.inside = not self.inside
            else:  # a whole block in one string: `_pem` redacts it
                self.inside = False
            return text
        if self.inside:
            if _KEY_BODY_LINE.fullmatch(text.strip()) and not text.strip().isdigit():
                return marker("private-key")
            if not text.strip().isdigit():  # a timestamp between lines keeps the run going
                self.inside = False
        return text


def _walk(value: Any, key: str | None, pem: _PemRun) -> Any:
    if isinstance(value, str):
        kind = secret_kind(key) if key is not None else None
        if kind is not None and _is_secret_value(kind, key or "", value):
            return marker(kind)
        return redact_text(pem.step(value))
    if isinstance(value, dict):
        return {k: _walk(v, k if isinstance(k, str) else None, pem) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, None, pem) for v in value]
    return value


def contains_secret(text: str) -> bool:
    """True when `redact_text` would change `text` (what a test or a guard asks)."""
    return redact_text(text) != text
