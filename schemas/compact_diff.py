"""What a re-derivation changed: two read snapshots in, a report out. Pure (no I/O), so it is tested alone;
below the services so `rederive` prints it and the review page shows it (services/review).

Per thread and in total: the tokens in context before and after; the rows whose compact changed;
the rows missing from, or new in, the new projection; the facts an old compact held that the new one
no longer holds anywhere (numbers, timestamps and counts, invariant 6); and the digests that now fail
(an error compact, or a dead letter on the new run's DLQ) where the old one did not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

ERROR_PREFIX = "could not be compacted"
# Keys whose numbers are counts: the compactors' own words for what they count.
_COUNT_KEY = re.compile(
    r"(^n$|count|total|omitted|kept|lines|spans|series|samples|events|occurrences|x$)", re.I
)
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|(?<![\d:])\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
# Hashes and ids (letters and digits mixed, 8+ long) state no number.
_HEXISH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{8,}\b", re.I)
# A number, not the digits inside a word (`sha256`), though `x198` is a count.
_NUMBER = re.compile(r"(?<![A-Za-wyz_\d])-?\d+(?:,\d{3})*(?:\.\d+)?")
_COUNTED = re.compile(
    r"\s?(?:×|x\b|(?:lines?|patterns?|series|spans?|events?|errors?|samples?|occurrences?|pods?|times)\b)"
)


@dataclass(frozen=True)
class Row:
    """One visible row as the agent reads it: what is in context (`compact`, else the raw) and its tokens."""

    id: str
    thread_ts: str
    role: str
    compact: Any
    tokens: int


@dataclass(frozen=True)
class Snapshot:
    """A projection's rows by id, and the dead letters of its compactor by message id."""

    schema: str
    rows: Mapping[str, Row]
    dead_letters: Mapping[str, str] = field(default_factory=dict)  # message_id -> reason


@dataclass(frozen=True)
class Fact:
    kind: str  # count | timestamp | number
    value: str
    where: str  # the JSON path it was found at in the old compact


@dataclass
class ThreadDiff:
    thread_ts: str
    rows_before: int = 0
    rows_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the old projection, not in the new
    added: list[str] = field(default_factory=list)
    lost_facts: dict[str, list[Fact]] = field(default_factory=dict)
    failing: dict[str, str] = field(default_factory=dict)  # id -> why it fails now

    @property
    def lost_fact_count(self) -> int:
        return sum(len(v) for v in self.lost_facts.values())

    @property
    def regressions(self) -> int:
        return self.lost_fact_count + len(self.failing) + len(self.missing)


@dataclass
class Report:
    before: str
    after: str
    threads: list[ThreadDiff]

    def total(self) -> ThreadDiff:
        t = ThreadDiff("total")
        for d in self.threads:
            t.rows_before += d.rows_before
            t.rows_after += d.rows_after
            t.tokens_before += d.tokens_before
            t.tokens_after += d.tokens_after
            t.changed += d.changed
            t.missing += d.missing
            t.added += d.added
            t.lost_facts.update(d.lost_facts)
            t.failing.update(d.failing)
        return t

    @property
    def regressions(self) -> int:
        return sum(d.regressions for d in self.threads)

    def to_json(self) -> dict[str, Any]:
        def one(d: ThreadDiff) -> dict[str, Any]:
            out = asdict(d)
            out["tokens_delta"] = d.tokens_after - d.tokens_before
            out["lost_fact_count"] = d.lost_fact_count
            out["regressions"] = d.regressions
            return out

        return {
            "before": self.before,
            "after": self.after,
            "total": {k: v for k, v in one(self.total()).items() if k != "thread_ts"},
            "threads": [one(d) for d in self.threads],
        }


# --- facts ----------------------------------------------------------------------------------------


def _number(text: str) -> str:
    """One spelling per number: thousands separators dropped, 5.0 -> 5."""
    plain = text.replace(",", "")
    try:
        value = float(plain)
    except ValueError:
        return plain
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return plain


def _from_text(text: str, where: str, count: bool) -> Iterable[Fact]:
    for m in _TIMESTAMP.finditer(text):
        yield Fact("timestamp", m.group(0), where)
    rest = _HEXISH.sub(" ", _TIMESTAMP.sub(" ", text))
    for m in _NUMBER.finditer(rest):
        counted = (
            count or bool(_COUNTED.match(rest, m.end())) or rest[max(0, m.start() - 1) : m.start()] == "x"
        )
        yield Fact("count" if counted else "number", _number(m.group(0)), where)


def facts(value: Any, where: str = "$", key: str = "") -> list[Fact]:
    """Every number, timestamp and count a compact states, with where it says it."""
    counted = bool(key) and bool(_COUNT_KEY.search(key))
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [Fact("count" if counted else "number", _number(repr(value)), where)]
    if isinstance(value, str):
        return list(_from_text(value, where, counted))
    if isinstance(value, Mapping):
        return [f for k, v in value.items() for f in facts(v, f"{where}.{k}", str(k))]
    if isinstance(value, list | tuple):
        return [f for i, v in enumerate(value) for f in facts(v, f"{where}[{i}]", key)]
    return []


def lost_facts(old: Any, new: Any) -> list[Fact]:
    """Facts of `old` whose value appears nowhere in `new` (a count moved elsewhere is not lost).

    One fact per value; it is a count if the old compact stated that value as a count anywhere."""
    kept = {f.value for f in facts(new)}
    lost: dict[str, Fact] = {}
    for f in facts(old):
        if f.value in kept:
            continue
        if f.value not in lost or (f.kind == "count" and lost[f.value].kind != "count"):
            lost[f.value] = f
    return list(lost.values())


def failure(row: Row | None, dead: Mapping[str, str]) -> str | None:
    """Why a row's digest failed (an error compact, or a dead letter), or None."""
    if row is None:
        return None
    if row.id in dead:
        return f"dead letter: {dead[row.id]}"
    compact = row.compact
    if isinstance(compact, Mapping) and str(compact.get("error", "")).startswith(ERROR_PREFIX):
        return str(compact["error"])
    return None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --- the report -----------------------------------------------------------------------------------


def diff(before: Snapshot, after: Snapshot) -> Report:
    """Compare two projections row by row (by id), grouped by thread."""
    by_thread: dict[str, ThreadDiff] = {}

    def thread(ts: str) -> ThreadDiff:
        return by_thread.setdefault(ts, ThreadDiff(ts))

    for row in before.rows.values():
        d = thread(row.thread_ts)
        d.rows_before += 1
        d.tokens_before += row.tokens
    for row in after.rows.values():
        d = thread(row.thread_ts)
        d.rows_after += 1
        d.tokens_after += row.tokens
    for rid in sorted(before.rows.keys() | after.rows.keys()):
        old, new = before.rows.get(rid), after.rows.get(rid)
        d = thread((old or new).thread_ts)  # type: ignore[union-attr]
        if new is None:
            d.missing.append(rid)
            continue
        if old is None:
            d.added.append(rid)
        why = failure(new, after.dead_letters)
        was_failing = failure(old, before.dead_letters) is not None
        if why is not None and not was_failing:
            d.failing[rid] = why  # its facts are all gone: counted here, not again as lost facts
        if old is not None and _canonical(old.compact) != _canonical(new.compact):
            d.changed.append(rid)
            if why is None and not was_failing:
                lost = lost_facts(old.compact, new.compact)
                if lost:
                    d.lost_facts[rid] = lost
    return Report(before.schema, after.schema, [by_thread[k] for k in sorted(by_thread)])


def _delta(before: int, after: int) -> str:
    if before == 0:
        return "new" if after else "0%"
    return f"{100.0 * (after - before) / before:+.1f}%"


def render(report: Report, *, detail: int = 20, max_threads: int = 40) -> str:
    """The table: a line per thread that changed (those with regressions first, at most `max_threads`),
    the total, then the first `detail` lost facts, failures and missing rows."""
    header = (
        f"{'thread':<28}  {'rows':>11}  {'tokens before':>13}  {'after':>9}  {'change':>7}  "
        f"{'changed':>7}  {'lost facts':>10}  {'failing':>7}  {'missing':>7}"
    )
    lines = [f"context diff: {report.before} -> {report.after}", header, "-" * len(header)]

    def line(d: ThreadDiff) -> str:
        rows = f"{d.rows_before}->{d.rows_after}" if d.rows_before != d.rows_after else str(d.rows_after)
        ts = d.thread_ts if len(d.thread_ts) <= 28 else d.thread_ts[:27] + "…"
        return (
            f"{ts:<28}  {rows:>11}  {d.tokens_before:>13,}  {d.tokens_after:>9,}  "
            f"{_delta(d.tokens_before, d.tokens_after):>7}  {len(d.changed):>7}  {d.lost_fact_count:>10}  "
            f"{len(d.failing):>7}  {len(d.missing):>7}"
        )

    worth = [d for d in report.threads if d.changed or d.added or d.regressions]
    shown_threads = sorted(worth, key=lambda d: (-d.regressions, d.thread_ts))[:max_threads]
    lines += [line(d) for d in shown_threads]
    rest = len(report.threads) - len(shown_threads)
    if rest:
        lines.append(
            f"... and {rest} more threads ({len(report.threads) - len(worth)} unchanged); all in the JSON"
        )
    lines += ["-" * len(header), line(report.total())]
    total = report.total()
    shown = 0
    for rid, lost in total.lost_facts.items():
        if shown >= detail:
            break
        said = ", ".join(f"{f.kind} {f.value} ({f.where})" for f in lost[:6])
        more = f" and {len(lost) - 6} more" if len(lost) > 6 else ""
        lines.append(f"lost  {rid}: {said}{more}")
        shown += 1
    for rid, why in list(total.failing.items())[: max(0, detail - shown)]:
        lines.append(f"fails {rid}: {why[:160]}")
    for rid in total.missing[:detail]:
        lines.append(f"gone  {rid}: in {report.before}, not in {report.after}")
    if report.regressions == 0:
        lines.append(
            f"no lost facts, no new failures, no missing rows; {len(total.changed)} compacts changed"
        )
    return "\n".join(lines)
