"""The telemetry back ends' own forms of a time: Prometheus's Unix seconds and a query window. The
parsing is services/boundary/timearg.py's (RFC 3339, Unix seconds or Unix nanoseconds, to integer
nanoseconds), the same the scope checks use, so comparisons are exact and both read a time alike.
"""

from __future__ import annotations

from services.boundary.timearg import NS_PER_S, BadTimeArg, parse_time_ns


def ns_to_unix_seconds(ns: int) -> str:
    """Render nanoseconds as Unix seconds, the form Prometheus timestamps take, without float error."""
    seconds, frac = divmod(ns, NS_PER_S)
    return f"{seconds}.{frac:09d}".rstrip("0").rstrip(".")


def window_ns(start: str, end: str) -> tuple[int, int]:
    """Parse a query window and insist that it is not inverted."""
    start_ns, end_ns = parse_time_ns(start), parse_time_ns(end)
    if end_ns < start_ns:
        raise BadTimeArg(f"end {end!r} is before start {start!r}")
    return start_ns, end_ns
