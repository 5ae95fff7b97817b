"""Time arguments as Loki and Prometheus accept them, parsed once so every back end agrees.

A tool argument is RFC 3339 (`2026-03-14T09:00:00Z`), Unix seconds (`1773478800`,
`1773478800.5`) or Unix nanoseconds (an integer of 16+ digits, Loki's native form).
Everything is normalised to integer nanoseconds, so comparisons are exact.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

NS_PER_S = 1_000_000_000

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_NS = {
    "ms": 1_000_000,
    "s": NS_PER_S,
    "m": 60 * NS_PER_S,
    "h": 3600 * NS_PER_S,
    "d": 86400 * NS_PER_S,
    "w": 7 * 86400 * NS_PER_S,
    "y": 365 * 86400 * NS_PER_S,
}


class TimeArgError(ValueError):
    """A time or duration argument that neither Loki nor Prometheus would accept."""


def parse_time_ns(value: str) -> int:
    """Parse an RFC 3339 timestamp, Unix seconds or Unix nanoseconds into integer nanoseconds."""
    text = str(value).strip()
    if not text:
        raise TimeArgError("empty time")
    if re.fullmatch(r"\d{16,}", text):
        return int(text)
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        try:
            return int(Decimal(text) * NS_PER_S)
        except InvalidOperation as exc:  # pragma: no cover - the regex already checked the shape
            raise TimeArgError(f"not a time: {value!r}") from exc
    return _parse_rfc3339_ns(text, value)


def _parse_rfc3339_ns(text: str, original: str) -> int:
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", text)
    if match is None:
        raise TimeArgError(
            f"not a time: {original!r} (use RFC 3339 like 2026-03-14T09:00:00Z, Unix seconds or Unix nanoseconds)"
        )
    base, frac, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        dt = datetime.fromisoformat(base.replace("t", "T").replace(" ", "T") + zone)
    except ValueError as exc:
        raise TimeArgError(f"not a time: {original!r} ({exc})") from None
    seconds = int(dt.astimezone(UTC).timestamp())
    frac_ns = int((frac or ".0")[1:].ljust(9, "0")[:9])
    return seconds * NS_PER_S + frac_ns


def parse_duration_ns(value: str) -> int:
    """Parse a Prometheus step: a duration (`30s`, `1m30s`) or float seconds (`15`, `0.5`)."""
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        ns = int(Decimal(text) * NS_PER_S)
    else:
        pos, ns = 0, 0
        for match in _DURATION.finditer(text):
            if match.start() != pos:
                break
            ns += int(Decimal(match.group(1)) * _UNIT_NS[match.group(2)])
            pos = match.end()
        if pos != len(text) or not text:
            raise TimeArgError(f"not a duration: {value!r} (use 30s, 1m, 1h30m or seconds)")
    if ns <= 0:
        raise TimeArgError(f"duration must be positive: {value!r}")
    return ns


def ns_to_rfc3339(ns: int) -> str:
    """Render nanoseconds as RFC 3339 UTC with nanosecond precision (trailing zeros dropped)."""
    seconds, frac = divmod(ns, NS_PER_S)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}".rstrip("0").rstrip(".") + "Z"


def ns_to_unix_seconds(ns: int) -> str:
    """Render nanoseconds as Unix seconds, the form Prometheus timestamps take, without float error."""
    seconds, frac = divmod(ns, NS_PER_S)
    return f"{seconds}.{frac:09d}".rstrip("0").rstrip(".")


def window_ns(start: str, end: str) -> tuple[int, int]:
    """Parse a query window and insist that it is not inverted."""
    start_ns, end_ns = parse_time_ns(start), parse_time_ns(end)
    if end_ns < start_ns:
        raise TimeArgError(f"end {end!r} is before start {start!r}")
    return start_ns, end_ns
