"""Timestamps of the raws: strict parsing into unix nanoseconds, and exact rendering as ISO 8601 UTC.

Parsing. One parser per way a raw writes a time, each accepting only that way and only times in
`WINDOW` (1970-01-01 to 9999-12-31, UTC), else a ValueError whose message says why (the compactor
adds where and raises RawFormatError):
- `ns_from_integer`: unix nanoseconds as Loki and OTLP (Tempo) write them, a JSON integer or a
  string of ASCII digits;
- `ns_from_unix_seconds`: unix seconds as Prometheus writes them, a JSON number or a string of
  ASCII digits with an optional fraction;
- `ns_from_rfc3339`: an RFC 3339 time (Kubernetes events, Grafana's Loki entries).
Never a bool (`true` is not 1 ns), never what `int()`/`float()` also take (`"²"`, `"١٢"`, `" 12"`,
`"1_000"`, `"nan"`), never a time before 1970 (no incident raw has one, and it would print as
1969 or 1811) or after 9999 (it cannot be printed as four digits). Every time a compactor shows
went through one of these, so rendering never meets a time it cannot print.

Rendering keeps every digit of the raw (nothing rounded).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from schemas.memo import Memo

MIN_NS = 0  # 1970-01-01T00:00:00Z
MAX_NS = 253_402_300_799_999_999_999  # 9999-12-31T23:59:59.999999999Z
WINDOW = "1970-01-01..9999-12-31"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_DIGITS = 40  # longer digit strings are out of the window whatever they say (and int() has a limit)
_SECONDS = re.compile(r"[0-9]{1,40}(?:\.[0-9]{1,40})?", re.ASCII)
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,30}))?"
    r"(?:([Zz])|([+-])([0-9]{2}):?([0-9]{2}))?",
    re.ASCII,
)
_SHOWN = 40


def shown(value: Any) -> str:
    """A raw value in a one-line message: its repr, clipped."""
    if type(value) is int and value.bit_length() > 200:  # repr() of a huge int is slow, or refused
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _in_window(ns: int, value: Any) -> int:
    if not MIN_NS <= ns <= MAX_NS:
        raise ValueError(f"{shown(value)} is outside {WINDOW}")
    return ns


def ns_from_integer(value: Any) -> int:
    """Unix ns from a JSON integer or a string of ASCII digits (`"1773457964187000000"`), in `WINDOW`."""
    if type(value) is int:  # not bool
        return _in_window(value, value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        if len(value.lstrip("0")) > _MAX_DIGITS:
            raise ValueError(f"{shown(value)} is outside {WINDOW}")
        return _in_window(int(value), value)
    raise ValueError(f"{shown(value)} is not integer nanoseconds (an integer or a string of digits)")


def ns_from_unix_seconds(value: Any) -> int:
    """Exact unix ns from unix seconds: a JSON number (not bool, finite) or an ASCII decimal string
    (`1773457964.187`, `"1773457964.187"`), in `WINDOW`."""
    if type(value) is int:  # not bool
        return _in_window(value * 1_000_000_000, value)
    if type(value) is float:
        dec = Decimal(repr(value))  # the float's shortest repr: the digits the raw wrote
    elif isinstance(value, str) and _SECONDS.fullmatch(value):
        dec = Decimal(value)
    else:
        raise ValueError(f"{shown(value)} is not unix seconds (a number)")
    if not dec.is_finite():
        raise ValueError(f"{shown(value)} is not unix seconds (a finite number)")
    if dec.adjusted() > 12 or dec < 0:  # 10^13 s is after 9999; the window check needs no huge int
        raise ValueError(f"{shown(value)} is outside {WINDOW}")
    return _in_window(int(dec * 1_000_000_000), value)


def ns_from_rfc3339(value: Any, *, zone_required: bool = True) -> int:
    """Unix ns of an RFC 3339 time (`2026-03-14T03:12:44.187Z`, `...+01:00`), nanoseconds kept
    (further digits cut), in `WINDOW`. `zone_required=False` reads a time without offset as UTC
    (Kubernetes writes `Z`; some tools write none)."""
    match = _RFC3339.fullmatch(value) if isinstance(value, str) and len(value) <= 64 else None
    if match is None:
        raise ValueError(f"{shown(value)} is not an RFC 3339 time")
    y, mo, d, h, mi, s, frac, utc, sign, oh, om = match.groups()
    if not utc and not sign and zone_required:
        raise ValueError(f"{shown(value)} is not an RFC 3339 time (no offset)")
    try:
        moment = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{shown(value)} is not a valid date and time") from None
    offset = 0
    if sign:
        if int(oh) > 23 or int(om) > 59:
            raise ValueError(f"{shown(value)} has an offset out of range")
        offset = (int(oh) * 3600 + int(om) * 60) * (1 if sign == "+" else -1)
    delta = moment - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds - offset
    return _in_window(seconds * 1_000_000_000 + int((frac or "0")[:9].ljust(9, "0")), value)


def iso_from_ns(ns: int) -> str:
    """`1773457964187000000` -> `2026-03-14T03:12:44.187Z`; nanoseconds kept when present, so it is lossless.
    A time outside `WINDOW` is a ValueError: the parsers above never let one through."""
    if not MIN_NS <= ns <= MAX_NS:
        raise ValueError(f"{ns} ns is outside {WINDOW}")
    secs, frac = divmod(ns, 1_000_000_000)
    base = _SECOND_TEXT.get(secs)
    if base is None:  # a raw's times fall in few seconds: strftime once per second, not per time
        base = _SECOND_TEXT.keep(secs, (_EPOCH + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{base}.{frac:09d}".rstrip("0") + "Z" if frac else f"{base}Z"


_SECOND_TEXT: Memo[int, str] = Memo(65_536)


def iso_from_unix(value: float | int | str) -> str:
    """Prometheus-style unix seconds (possibly fractional) -> exact ISO 8601 UTC."""
    try:
        dec = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"not a unix timestamp: {value!r}") from None
    return iso_from_ns(int(dec * 1_000_000_000))


class Clock:
    """Terse times for one digest: the date is said once (in `window`), each time only as much as
    differs across the digest (HH:MM:SS within a day, MM-DD HH:MM:SS within a year). Seconds are
    cut, never rounded, so every shown digit is the raw's; `.mmm` only where two times share a second.
    """

    def __init__(self, first_ns: int, last_ns: int) -> None:
        a, b = iso_from_ns(first_ns), iso_from_ns(last_ns)
        self.cut = 11 if a[:10] == b[:10] else 5 if a[:4] == b[:4] else 0
        self.first_ns, self.last_ns = first_ns, last_ns

    def at(self, ns: int, millis: bool = False) -> str:
        text = iso_from_ns(ns).rstrip("Z")
        whole = text[:19]
        if millis:
            frac = text[20:23] if len(text) > 19 else ""
            whole += "." + frac.ljust(3, "0")
        return whole[self.cut :].replace("T", " ")

    def span(self, first_ns: int, last_ns: int) -> str:
        """`03:12:44–03:14:01`; one time when both fall in the same second and are equal."""
        if first_ns == last_ns:
            return self.at(first_ns)
        same_second = first_ns // 1_000_000_000 == last_ns // 1_000_000_000
        return f"{self.at(first_ns, same_second)}–{self.at(last_ns, same_second)}"

    def window(self) -> str:
        """`2026-03-14 03:00:01–03:15:00Z`: the date once, then the span at this clock's resolution
        (milliseconds only to tell apart two instants in one second: one instant is to the second)."""
        same_second = (
            self.first_ns != self.last_ns and self.first_ns // 1_000_000_000 == self.last_ns // 1_000_000_000
        )
        a = (
            iso_from_ns(self.first_ns).rstrip("Z")[:10]
            + " "
            + self.at(self.first_ns, same_second)[-8 - 4 * same_second :]
        )
        if self.first_ns == self.last_ns:
            return a + "Z"
        return f"{a}–{self.at(self.last_ns, same_second)}Z"
