"""Each page's reads: the statements of services/review/queries.py, then the pure views of model.py.

A row's raw is immutable (invariant 5: a re-rendering changes `compact`, never `content`), so its raw
token count is remembered per schema and row id: a thread page counts each large raw once per process,
and a tool row's raw is not even fetched again to draw the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

import psycopg

from schemas.tokens import count_value_tokens
from services.context_render.context import IncidentState
from services.context_render.model_calls import thread_calls
from services.review import calls, model, queries, recall_links
from services.review.drill import drill_down
from services.review.model import ThreadRow

PAGE_LINES = 200
INCIDENT_LIMIT = 200
_MEMO_LIMIT = 200_000
_raw_tokens: dict[tuple[str, str], int] = {}


def _schema(conn: psycopg.Connection) -> str:
    record = conn.execute("SELECT current_schema()").fetchone()
    return str(record[0]) if record else ""


def raw_tokens(conn: psycopg.Connection, rows: list[ThreadRow]) -> dict[str, int]:
    """count_value_tokens(content) of each row; tool raws fetched only when not yet counted."""
    schema = _schema(conn)
    missing = [r.id for r in rows if r.content is None and (schema, r.id) not in _raw_tokens]
    if missing:
        for row_id, content in conn.execute(queries.CONTENTS, (missing,)).fetchall():
            _remember(schema, row_id, count_value_tokens(content))
    out = {}
    for r in rows:
        if r.content is not None:
            out[r.id] = _raw_tokens.get((schema, r.id)) or _remember(
                schema, r.id, count_value_tokens(r.content)
            )
        else:
            out[r.id] = _raw_tokens[(schema, r.id)]
    return out


def raw_totals(conn: psycopg.Connection, threads: list[str]) -> dict[str, int]:
    """Each thread's raw tokens (the sum `show` prints), counting only raws not yet remembered."""
    schema = _schema(conn)
    ids = conn.execute(queries.THREAD_IDS, (threads,)).fetchall()
    missing = [row_id for row_id, _ts in ids if (schema, row_id) not in _raw_tokens]
    for start in range(0, len(missing), 500):
        for row_id, content in conn.execute(queries.CONTENTS, (missing[start : start + 500],)).fetchall():
            _remember(schema, row_id, count_value_tokens(content))
    out: dict[str, int] = {}
    for row_id, thread_ts in ids:
        out[thread_ts] = out.get(thread_ts, 0) + _raw_tokens.get((schema, row_id), 0)
    return out


def _remember(schema: str, row_id: str, tokens: int) -> int:
    if len(_raw_tokens) >= _MEMO_LIMIT:
        _raw_tokens.clear()
    _raw_tokens[(schema, row_id)] = tokens
    return tokens


def _allowed(channel: str | None, channels: frozenset[str] | None) -> bool:
    return channels is None or (channel is not None and channel in channels)


def incidents(
    conn: psycopg.Connection, filters: Mapping[str, str | None], day: date | None,
    channels: frozenset[str] | None,
) -> dict[str, Any]:  # fmt: skip
    params = {**filters, "day": day, "channels": sorted(channels) if channels is not None else None,
              "limit": INCIDENT_LIMIT}  # fmt: skip
    items = [model.incident_item(r) for r in conn.execute(queries.INCIDENTS, params).fetchall()]
    totals = raw_totals(conn, [i["thread_ts"] for i in items])
    recalled = recall_links.listed_recall(conn, [i["thread_ts"] for i in items], channels)
    for item in items:
        item["raw_tokens"] = totals.get(item["thread_ts"], 0)
        item["recall"] = recalled.get(item["thread_ts"], [])
    options = model.filter_options(conn.execute(queries.FILTER_VALUES).fetchall())
    if channels is not None:
        options["channel"] = [c for c in options["channel"] if c in channels]
    shown = {**filters, "date": day.isoformat() if day else None}
    return {"incidents": items, "filters": shown, "options": options, "limit": INCIDENT_LIMIT}


def _incident(
    conn: psycopg.Connection, thread_ts: str, channels: frozenset[str] | None
) -> dict[str, Any] | None:
    record = conn.execute(queries.INCIDENT, (thread_ts,)).fetchone()
    if record is None:
        return None
    header = model.incident_header(record)
    return header if _allowed(header["channel"], channels) else None


def _thread_row(record: tuple[Any, ...], keep_tool_raw: bool = False) -> ThreadRow:
    row = ThreadRow(*record)
    if row.role == "tool" and not keep_tool_raw:  # large raws stay in Postgres: counted, paged
        return ThreadRow(**{**row.__dict__, "content": None})
    return row


THREAD_ROWS_LEAN = queries.THREAD_ROWS.replace(
    "m.content,", "CASE WHEN m.role = 'tool' THEN NULL ELSE m.content END,"
)


def thread(
    conn: psycopg.Connection, thread_ts: str, channels: frozenset[str] | None
) -> dict[str, Any] | None:
    incident = _incident(conn, thread_ts, channels)
    if incident is None:
        return None
    rows = [_thread_row(r) for r in conn.execute(THREAD_ROWS_LEAN, (thread_ts,)).fetchall()]
    post_records = conn.execute(queries.POSTS, (thread_ts,)).fetchall()
    view = model.thread_view(incident, rows, raw_tokens(conn, rows), post_records, history(conn, thread_ts))
    return {**view, "recall": recall_links.thread_recall(conn, thread_ts, channels)}


def model_calls(
    conn: psycopg.Connection, thread_ts: str, channels: frozenset[str] | None
) -> dict[str, Any] | None:
    """Every investigate and hypothesis call of the thread, rebuilt from its rows (tool raws not read:
    the model was never sent them)."""
    record = conn.execute(queries.INCIDENT, (thread_ts,)).fetchone()
    incident = _incident(conn, thread_ts, channels)
    if incident is None or record is None:
        return None
    _ts, service, status, rounds, opened_at, w_start, w_end, _channel, _slack_ts = record
    state = IncidentState(service, status, w_start, w_end, rounds, opened_at)
    kept = history(conn, thread_ts)
    rows = [
        calls.stored(_thread_row(r), kept.get(r[3], ()))
        for r in conn.execute(THREAD_ROWS_LEAN, (thread_ts,)).fetchall()
    ]
    return calls.calls_view(incident, thread_calls(thread_ts, state, rows))


def history(conn: psycopg.Connection, thread_ts: str) -> dict[str, list[tuple[Any, ...]]]:
    """Each row's re-renderings, in the order applied: row id -> [(made for round, policy, compact, tokens)]."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for target, made, policy, compact, tokens in conn.execute(queries.HISTORY, (thread_ts,)).fetchall():
        out.setdefault(target, []).append((made, policy, compact, tokens))
    return out


def _slices(sizes: list[int], offset: int, limit: int) -> list[tuple[int, int, int, int]]:
    """(stream, first entry, last entry, first line number) of each stream a page of lines covers."""
    out, start = [], 0
    for k, size in enumerate(sizes):
        a, b = max(offset, start), min(offset + limit, start + size) - 1
        if a <= b:
            out.append((k, a - start, b - start, a))
        start += size
    return out


def _loki_page(conn: psycopg.Connection, args: dict[str, Any]) -> dict[str, Any]:
    shape = conn.execute(queries.LOKI_SHAPE, args).fetchall()
    sizes = [int(size) for _k, size, _labels in shape]
    lines = []
    for k, a, b, first in _slices(sizes, int(args["offset"]), int(args["limit"])):
        record = conn.execute(queries.LOKI_SLICE, {**args, "k": k, "a": a, "b": b}).fetchone()
        for n, entry in enumerate(record[0] if record else [], start=first):
            ts, text = [*entry, None, None][:2] if isinstance(entry, list) else (None, entry)
            lines.append({"n": n, "stream": k, "ts": ts, "text": text})
    return {
        "kind": "loki",
        "total": sum(sizes),
        "streams": {k: labels for k, _s, labels in shape},
        "lines": lines,
    }


def _raw_page(conn: psycopg.Connection, args: dict[str, Any], loki: bool) -> dict[str, Any]:
    if loki:
        return _loki_page(conn, args)
    total_rec = conn.execute(queries.JSON_TOTAL, args).fetchone()
    lines = [{"n": int(n), "text": text} for n, text in conn.execute(queries.JSON_PAGE, args).fetchall()]
    return {"kind": "json", "total": int(total_rec[0]) if total_rec else 0, "lines": lines}


def row(
    conn: psycopg.Connection, thread_ts: str, row_id: str, offset: int, pattern: str | None,
    channels: frozenset[str] | None,
) -> dict[str, Any] | None:  # fmt: skip
    incident = _incident(conn, thread_ts, channels)
    if incident is None:
        return None
    lean = queries.ONE_ROW.replace("m.content,", "CASE WHEN m.role = 'tool' THEN NULL ELSE m.content END,")
    record = conn.execute(lean, (thread_ts, row_id)).fetchone()
    if record is None:
        return None
    r = _thread_row(record)
    mine = history(conn, thread_ts).get(r.id, [])
    loki = r.tool == "query_loki"
    args = {"thread_ts": thread_ts, "id": row_id, "limit": PAGE_LINES, "offset": offset}
    view: dict[str, Any] = {
        "incident": incident,
        "row": model.table_row(r, raw_tokens(conn, [r])[r.id], 1, mine),
        "renderings": [{**x, "text": model.pretty(x.get("value"))} for x in model.renderings(r, mine)],
        "raw": _raw_page(conn, args, loki),
        "page_lines": PAGE_LINES,
        "offset": offset,
        "patterns": [],
        "pattern": None,
    }
    written = r.compact if r.first_compact is None else r.first_compact
    view["patterns"], view["pattern"] = drill_down(conn, args, r.tool, written, pattern, PAGE_LINES)
    return view
