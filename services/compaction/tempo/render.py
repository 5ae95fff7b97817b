"""tempo: rendering (docs/compaction.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from schemas.tokens import count_value_tokens
from services.compaction.render import clip
from services.compaction.tempo.parse import _ATTR_CHARS, _DIGITS, _MAX_ATTRS, _SERVICE_CHARS, Span
from services.compaction.timefmt import Clock


def ms(ns: int) -> str:
    """Nanoseconds as ms with the digits that matter: `411.8`, `0.012`, `183457` (rounded half up)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns >= 10_000_000_000:
        unit, decimals = 1_000_000, 0
    elif ns >= 1_000_000:
        unit, decimals = 100_000, 1
    else:
        unit, decimals = 1_000, 3
    whole, frac = divmod((ns + unit // 2) // unit, 10**decimals)
    text = f"{whole}.{frac:0{decimals}d}".rstrip("0").rstrip(".") if decimals else str(whole)
    return sign + text


def ms_range(durations: Iterable[int]) -> str:
    """`101..140ms`, or `411.8ms` when they are all one value at this resolution."""
    values = list(durations)
    lo, hi = ms(min(values)), ms(max(values))
    return f"{lo}ms" if lo == hi else f"{lo}..{hi}ms"


def _json_tokens(text: str) -> int:
    """Tokens of a string as it appears inside the digest's JSON (quotes and escapes included)."""
    return count_value_tokens([text])


def _clip_tokens(text: str, tokens: int) -> str:
    """The longest clip of `text` that costs at most `tokens` inside the digest (bounded headers)."""
    if _json_tokens(text) <= tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _json_tokens(clip(text, mid)) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return clip(text, lo)


def _template(name: str) -> tuple[str, ...]:
    """A span name with its digit runs masked: the key of a group of non-error spans."""
    return tuple(_DIGITS.split(name))


def _name_with_ranges(names: Sequence[str]) -> str:
    """`serialize line_item[0..15]`: one name, each digit run that varies across the group as min..max."""
    first = names[0]
    if len(names) == 1:
        return first
    parts = _DIGITS.split(first)
    slots = [_DIGITS.findall(n) for n in names]
    out = [parts[0]]
    for i, part in enumerate(parts[1:]):
        values = {s[i] for s in slots if i < len(s)}
        lo, hi = min(values, key=_numeric), max(values, key=_numeric)
        out.append(lo if lo == hi else f"{lo}..{hi}")
        out.append(part)
    return "".join(out)


def _numeric(digits: str) -> tuple[int, str]:
    """Numeric order of a digit run without int() (a run may be longer than int() accepts)."""
    return len(digits.lstrip("0")), digits


def _attr_text(span: Span, message: str) -> str:
    """` {k=v, ...}`: the exemplar span's attributes (the richest form only), each clipped."""
    attrs = [(k, v) for k, v in span.attrs if not (k == "exception.message" and v == message)]
    if not attrs:
        return ""
    shown = ", ".join(f"{clip(k, _SERVICE_CHARS)}={clip(v, _ATTR_CHARS)}" for k, v in attrs[:_MAX_ATTRS])
    more = f", +{len(attrs) - _MAX_ATTRS} more" if len(attrs) > _MAX_ATTRS else ""
    return f" {{{shown}{more}}}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _message(span: Span) -> str:
    """The status message, else the exception event's message: what the span said went wrong."""
    return span.status or dict(span.attrs).get("exception.message", "")


class _Times:
    """`Clock.at(ns, millis=True)`, each second formatted once: a trace's thousands of spans fall in
    a few seconds. Equal to the Clock's own rendering (tests check it)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._seconds: dict[int, str] = {}

    def at(self, ns: int) -> str:
        second, frac = divmod(ns, 1_000_000_000)
        head = self._seconds.get(second)
        if head is None:
            head = self._seconds[second] = self.clock.at(second * 1_000_000_000)
        return f"{head}.{frac // 1_000_000:03d}"
