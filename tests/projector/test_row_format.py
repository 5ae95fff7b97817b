"""`row_format` is the one definition of a row's columns and COPY format: everything else is held to it.

The migration's tables, the read model's context query, the batch table's COPY columns and the COPY
text a row renders to must all agree with `ROW_COLUMNS`; each test here fails when one drifts.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import psycopg

from schemas import read_model
from services.projector import row_format, sql
from services.projector.mapping import Row

# row_format's parameter types -> information_schema's udt_name for them.
UDT = {"text": "text", "int": "int4", "jsonb": "jsonb", "timestamptz": "timestamptz"}

ROW = Row(
    id="T:1:tools:0",
    thread_ts="T",
    round=1,
    role="tool",
    tool_call_id="call\t1",
    content='{"raw":"a\\\\b\\nc"}',
    compact='{"c":1}',
    tokens=7,
    created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
)


def copy_field(value: object) -> str:
    """COPY's text format by its definition, character by character."""
    if value is None:
        return "\\N"
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    escapes = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    return "".join(escapes.get(c, c) for c in text)


def test_copy_text_renders_the_columns_in_their_order() -> None:
    for row in (ROW, Row("i", "T", None, "human", None, "{}", None, 0, ROW.created_at)):
        fields = row_format.copy_text(row).split("\t")
        assert fields == [copy_field(getattr(row, c)) for c in row_format.ROW_COLUMNS]


def test_null_content_blanks_the_content_column_only() -> None:
    text = row_format.copy_text(ROW)
    fields, blanked = text.split("\t"), row_format.with_null_content(text).split("\t")
    content = row_format.ROW_COLUMNS.index("content")
    assert blanked[content] == "null"
    assert blanked[:content] + blanked[content + 1 :] == fields[:content] + fields[content + 1 :]


def test_row_params_are_one_array_per_column_in_order() -> None:
    params = row_format.row_params([ROW])
    assert params == [[getattr(ROW, c)] for c in row_format.ROW_COLUMNS]
    assert row_format.unnest_rows("r").count("%s") == len(row_format.ROW_COLUMNS)


def test_the_batch_table_carries_the_row_columns_between_routing_and_digest() -> None:
    columns = [c.strip() for c in sql.BATCH_COLUMNS.split(",")]
    assert columns == ["ord", "dest", "k1", "k2", *row_format.ROW_COLUMNS, "tool", "args_hash"]


def test_the_context_query_reads_only_row_columns() -> None:
    """The read model keeps its own SELECT (the agent's one query); every column it names is one of ours."""
    select = re.search(r"SELECT (.*) FROM agent_messages", read_model.CONTEXT_ROWS)
    assert select is not None
    words = set(re.findall(r"\b[a-z_]+\b", select.group(1)))
    keywords = {"coalesce", "case", "when", "then", "end"}
    named = words - keywords - {"answers", "post"}  # a JSON key and a role value, in quotes
    assert named and named <= set(row_format.ROW_COLUMNS)
    assert "ORDER BY seq" in read_model.CONTEXT_ROWS


def test_the_migrations_tables_match_the_row_columns(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    """Both tables hold ROW_COLUMNS in this order with these types; any other column fills itself."""
    for table in ("agent_messages", "round_staging"):
        found = pg_conn.execute(
            "SELECT column_name, udt_name, is_nullable = 'NO' AND column_default IS NULL"
            " AND is_identity = 'NO' AND is_generated = 'NEVER'"
            " FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
            " ORDER BY ordinal_position",
            (pg_schema, table),
        ).fetchall()
        ours = [(name, udt) for name, udt, _required in found if name in row_format.ROW_COLUMNS]
        assert ours == [(name, UDT[t]) for name, t in row_format.ROW_COLUMN_TYPES], table
        others_required = [
            name for name, _udt, required in found if required and name not in row_format.ROW_COLUMNS
        ]
        assert others_required == [], table


def test_a_rendered_row_copies_back_column_for_column(pg_conn: psycopg.Connection) -> None:
    with pg_conn.cursor().copy(sql.COPY_VISIBLE) as copy:
        copy.write(row_format.copy_text(ROW) + "\n")
    got = pg_conn.execute(
        f"SELECT {row_format.COLUMN_LIST} FROM agent_messages WHERE id = %s", (ROW.id,)
    ).fetchone()
    assert got == (
        ROW.id,
        ROW.thread_ts,
        ROW.round,
        ROW.role,
        ROW.tool_call_id,
        {"raw": "a\\b\nc"},
        {"c": 1},
        ROW.tokens,
        ROW.created_at,
    )
