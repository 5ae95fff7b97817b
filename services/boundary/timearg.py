"""Time and duration arguments of tool calls, parsed strictly: the one parser, for the scope checks and
for the telemetry server's requests to its back ends, so both read a time alike. Pure.

The same forms the telemetry tools accept: RFC 3339, Unix seconds or Unix nanoseconds (16+
digits); durations like `30s`, `1m30s` or plain seconds. Anything else is refused (fail closed).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

NS_PER_S = 1_000_000_000
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_NS = {"ms": 10**6, "s": NS_PER_S, "m": 60 * NS_PER_S, "h": 3600 * NS_PER_S}
_UNIT_NS |= {"d": 86400 * NS_PER_S, "w": 7 * 86400 * NS_PER_S, "y": 365 * 86400 * NS_PER_S}
_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


class BadTimeArg(ValueError):
    """A time or duration that cannot be read; the call is refused rather than guessed."""


def parse_time_ns(value: object) -> int:
    """RFC 3339, Unix seconds or Unix nanoseconds -> integer nanoseconds."""
    text = str(value).strip()
    if re.fullmatch(r"\d{16,}", text):
        return int(text)
    if re.fullmatch(r"\d{1,12}(\.\d+)?", text):
        return int(Decimal(text) * NS_PER_S)
    match = _RFC3339.fullmatch(text)
    if match:
        day, clock, frac, zone = match.groups()
        zone = "+00:00" if zone in ("Z", "z") else zone
        try:
            parsed = datetime.fromisoformat(f"{day}T{clock}{zone}")
        except ValueError:
            raise BadTimeArg(f"not a time: {value!r}") from None
        return int(parsed.timestamp()) * NS_PER_S + int((frac or ".0")[1:].ljust(9, "0")[:9])
    raise BadTimeArg(
        f"not a time: {value!r} (use RFC 3339 like 2026-03-14T09:00:00Z, Unix seconds or Unix nanoseconds)"
    )


def parse_duration_ns(value: object) -> int:
    """A Prometheus duration (`15s`, `1m30s`) or plain seconds -> positive nanoseconds."""
    text = str(value).strip()
    try:
        if re.fullmatch(r"\d+(\.\d+)?", text):
            ns = int(Decimal(text) * NS_PER_S)
        else:
            parts = list(_DURATION.finditer(text))
            if not text or "".join(m.group(0) for m in parts) != text:
                raise BadTimeArg(f"not a duration: {value!r} (use 30s, 1m, 1h30m or seconds)")
            ns = sum(int(Decimal(m.group(1)) * _UNIT_NS[m.group(2)]) for m in parts)
    except InvalidOperation:
        raise BadTimeArg(f"not a duration: {value!r}") from None
    if ns <= 0:
        raise BadTimeArg(f"duration must be positive: {value!r}")
    return ns


def rfc3339(ns: int) -> str:
    """Nanoseconds as RFC 3339 UTC (fraction only when there is one)."""
    seconds, frac = divmod(ns, NS_PER_S)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return (f"{base}.{frac:09d}".rstrip("0") if frac else base) + "Z"


def seconds_text(ns: int) -> str:
    """A duration in whole seconds, as Prometheus reads a step (`60s`)."""
    return f"{-(-ns // NS_PER_S)}s"
