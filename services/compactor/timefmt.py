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


def hhmm_from_unix(value: float | int | str) -> str:
    """A short human form (`03:02`) written beside raw timestamps, never instead of them."""
    return iso_from_unix(value)[11:16]
