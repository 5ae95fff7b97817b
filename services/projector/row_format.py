"""The one definition of a projected row's columns and of their COPY text format.

`agent_messages` and `round_staging` (schemas/migrations/001_initial.sql) share these columns, in
this order. Every statement in `sql.py` that names them, the parameter arrays the in-order plan
binds, and the COPY lines the COPY plan writes are built from `ROW_COLUMNS`, so the order is known
here and nowhere else (tests/projector/test_row_format.py holds the migration and the read model's
SELECT to it). The mapping (`mapping.py`) stays free of any wire format: it makes `Row` values, and
the decoding thread renders their COPY text with `render_copy_texts`, off the writer's path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from services.projector.mapping import Op, Row

# (column, its Postgres type as the unnest parameters declare it), in the tables' order.
ROW_COLUMN_TYPES: tuple[tuple[str, str], ...] = (
    ("id", "text"),
    ("thread_ts", "text"),
    ("round", "int"),
    ("role", "text"),
    ("tool_call_id", "text"),
    ("content", "jsonb"),
    ("compact", "jsonb"),
    ("tokens", "int"),
    ("created_at", "timestamptz"),
)
ROW_COLUMNS: tuple[str, ...] = tuple(name for name, _type in ROW_COLUMN_TYPES)
COLUMN_LIST = ", ".join(ROW_COLUMNS)
CONTENT_FIELD = ROW_COLUMNS.index("content")  # the field a batch-table line may blank (`with_null_content`)

NULL = "\\N"  # COPY text format's NULL


def qualified(alias: str) -> str:
    """The column list with a table alias (`s.id, s.thread_ts, ...`)."""
    return ", ".join(f"{alias}.{c}" for c in ROW_COLUMNS)


def unnest_rows(alias: str) -> str:
    """`unnest(...)` of one array parameter per column, as `alias` with an `ord` column (its order)."""
    arrays = ", ".join(f"%s::{t}[]" for _name, t in ROW_COLUMN_TYPES)
    return f"unnest({arrays}) WITH ORDINALITY AS {alias}({COLUMN_LIST}, ord)"


def row_params(rows: Sequence[Row]) -> list[list[Any]]:
    """One array per column, in `ROW_COLUMNS` order (the parameters of `unnest_rows`)."""
    return [[getattr(r, c) for r in rows] for c in ROW_COLUMNS]


def copy_escape(value: str) -> str:
    """A value in COPY's text format (backslash escapes); most values need none.

    Chained `str.replace` (C loops) rather than `str.translate` with a dict, which looks every
    character up in Python (benchmarks/bench_projector.py measures the decoding path).
    The backslash goes first, so the escapes added after it are not doubled.
    """
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if "\t" in value:
        value = value.replace("\t", "\\t")
    if "\n" in value:
        value = value.replace("\n", "\\n")
    if "\r" in value:
        value = value.replace("\r", "\\r")
    return value


def copy_text(row: Row) -> str:
    """The row's columns, in `ROW_COLUMNS` order, as one tab-separated fragment of COPY's text format.

    Written out field by field rather than looped over `ROW_COLUMNS`: it runs once per row on the
    decoding path; tests/projector/test_row_format.py checks it against the column order.
    """
    return (
        f"{copy_escape(row.id)}\t{copy_escape(row.thread_ts)}\t{NULL if row.round is None else row.round}\t"
        f"{copy_escape(row.role)}\t{NULL if row.tool_call_id is None else copy_escape(row.tool_call_id)}\t"
        f"{copy_escape(row.content)}\t{NULL if row.compact is None else copy_escape(row.compact)}\t"
        f"{row.tokens}\t{row.created_at.isoformat()}"
    )


def render_copy_texts(ops: Iterable[Op]) -> None:
    """Render the COPY text of every row in `ops` into its `copy_text` slot (the decoding thread's job)."""
    for op in ops:
        if isinstance(op, Row):
            op.copy_text = copy_text(op)


def line_of(row: Row) -> str:
    """The row's COPY text: as rendered when decoded, or now (a row made elsewhere, e.g. in a test)."""
    text = row.copy_text
    return copy_text(row) if text is None else text


def with_null_content(text: str) -> str:
    """A row's COPY text with its content as JSON null, so COPY parses no raw twice (a row that only
    carries its digest into the batch table)."""
    start = -1
    for _ in range(CONTENT_FIELD):
        start = text.index("\t", start + 1)
    end = text.index("\t", start + 1)
    return text[: start + 1] + "null" + text[end:]
