"""Exact timestamp rendering: ISO 8601 UTC keeping every digit of the raw (nothing rounded)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation


def iso_from_ns(ns: int) -> str:
    """`1773457964187000000` -> `2026-03-14T03:12:44.187Z`; nanoseconds kept when present, so it is lossless."""
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}".rstrip("0") + "Z" if frac else f"{base}Z"


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
        """`2026-03-14 03:00:01–03:15:00Z`: the date once, then the span at this clock's resolution."""
        same_second = self.first_ns // 1_000_000_000 == self.last_ns // 1_000_000_000
        a = (
            iso_from_ns(self.first_ns).rstrip("Z")[:10]
            + " "
            + self.at(self.first_ns, same_second)[-8 - 4 * same_second :]
        )
        if self.first_ns == self.last_ns:
            return a + "Z"
        return f"{a}–{self.at(self.last_ns, same_second)}Z"
