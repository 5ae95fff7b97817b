"""A peer on the same thread: LangGraph's `PostgresSaver` against our `agent_messages`.

Both store the same thread, round by round. The peer is used the way a LangGraph agent uses
it: a graph over `MessagesState`, checkpointed after each step, with the tool results as the
model saw them (raw, since the peer has no write-time compaction). We compare the bytes each
keeps in Postgres, the time to load a thread's context, and the tokens that context costs.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from benchmarks.thread_builder import Row, build_thread
from schemas.migrate import apply_migrations
from schemas.tokens import count_tokens
from services.runtime.settings import Settings

ROUNDS = (1, 2, 4, 8, 12)
LOAD_REPEATS = 50
LOAD_QUERY = (
    "SELECT role, tool_call_id, coalesce(compact, content), tokens FROM agent_messages "
    "WHERE thread_ts = %s ORDER BY seq"
)


def _schema_size(conn: psycopg.Connection[Any], schema: str, tables: list[str]) -> int:
    total = 0
    for table in tables:
        found = conn.execute("SELECT to_regclass(%s)", (f"{schema}.{table}",)).fetchone()
        if found and found[0] is not None:
            size = conn.execute(
                "SELECT pg_total_relation_size(%s::regclass)", (f"{schema}.{table}",)
            ).fetchone()
            total += int(size[0]) if size else 0
    return total


def _p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def measure_ours(dsn: str, rows: list[Row], thread_ts: str) -> dict[str, Any]:
    schema = f"bench_ours_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn) as conn:
        apply_migrations(conn, schema)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                [
                    (
                        r.id,
                        thread_ts,
                        r.round,
                        r.role,
                        r.tool_call_id,
                        json.dumps(r.content),
                        None if r.compact is None else json.dumps(r.compact),
                        r.tokens_in_context,
                        r.created_at,
                    )
                    for r in rows
                ],
            )
        conn.commit()
        samples = []
        context_tokens = 0
        for _ in range(LOAD_REPEATS):
            t = time.perf_counter()
            loaded = conn.execute(LOAD_QUERY, (thread_ts,)).fetchall()
            samples.append(time.perf_counter() - t)
            context_tokens = sum(rec[3] for rec in loaded)
        size = _schema_size(conn, schema, ["agent_messages"])
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.commit()
    return {"bytes": size, "load_p50_ms": _p50_ms(samples), "context_tokens": context_tokens}


def _to_langchain(row: Row) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    if row.role == "tool":
        return ToolMessage(content=json.dumps(row.content), tool_call_id=row.tool_call_id or "", id=row.id)
    if row.role == "alert":
        return SystemMessage(content=json.dumps(row.content), id=row.id)
    if row.role == "human":
        return HumanMessage(content=str(row.content.get("text", "")), id=row.id)
    calls = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in row.content.get("tool_calls", [])]
    return AIMessage(content=json.dumps(row.content), tool_calls=calls, id=row.id)


def _steps(rows: list[Row]) -> list[list[Row]]:
    """Group rows into graph steps as a ReAct agent makes them: the tool results of a call come together."""
    steps: list[list[Row]] = []
    for row in rows:
        if row.role == "tool" and steps and steps[-1][0].role == "tool":
            steps[-1].append(row)
        else:
            steps.append([row])
    return steps


def measure_peer(dsn: str, rows: list[Row], thread_ts: str) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import START, MessagesState, StateGraph

    schema = f"bench_peer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    conn = psycopg.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-c search_path={schema}"
    )
    try:
        saver = PostgresSaver(conn)
        saver.setup()
        builder = StateGraph(MessagesState)
        builder.add_node("step", lambda state: {})
        builder.add_edge(START, "step")
        graph: Any = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread_ts}}
        for step in _steps(rows):
            graph.invoke({"messages": [_to_langchain(r) for r in step]}, config)
        samples = []
        messages: list[Any] = []
        for _ in range(LOAD_REPEATS):
            t = time.perf_counter()
            messages = graph.get_state(config).values["messages"]
            samples.append(time.perf_counter() - t)
        context_tokens = sum(
            count_tokens(m.content if isinstance(m.content, str) else json.dumps(m.content)) for m in messages
        )
    finally:
        conn.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            size = _schema_size(admin, schema, ["checkpoints", "checkpoint_blobs", "checkpoint_writes"])
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return {
        "bytes": size,
        "load_p50_ms": _p50_ms(samples),
        "context_tokens": context_tokens,
        "messages": len(messages),
    }


def run(settings: Settings) -> dict[str, Any]:
    table: list[dict[str, Any]] = []
    for rounds in ROUNDS:
        thread_ts = f"17734{rounds:05d}.000100"
        rows = build_thread(rounds, thread_ts)
        ours = measure_ours(settings.database_url, rows, thread_ts)
        peer = measure_peer(settings.database_url, rows, thread_ts)
        table.append({"rounds": rounds, "rows": len(rows), "ours": ours, "peer": peer})
    lines = [
        "Storage and load time for the same thread, in our `agent_messages` (raw + compact side by side) and in "
        "LangGraph's `langgraph-checkpoint-postgres` `PostgresSaver` (a `MessagesState` graph checkpointed after "
        "each step, tool results as the model saw them). The 2-round thread is the 20-message seed shape. "
        f"Load time is the median of {LOAD_REPEATS} loads: our one query vs `graph.get_state()`.\n",
        "| rounds | rows | our bytes | peer bytes | peer/ours bytes | our load ms | peer load ms | peer/ours load | our context tok | peer context tok |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in table:
        o, p = t["ours"], t["peer"]
        lines.append(
            f"| {t['rounds']} | {t['rows']} | {o['bytes']:,} | {p['bytes']:,} | {p['bytes'] / o['bytes']:.1f}x | "
            f"{o['load_p50_ms']:.2f} | {p['load_p50_ms']:.2f} | {p['load_p50_ms'] / o['load_p50_ms']:.1f}x | "
            f"{o['context_tokens']:,} | {p['context_tokens']:,} |"
        )
    lines.append(
        "\nOur bytes include the raw of every tool result (kept verbatim for `get_evidence`) beside its compact. "
        "The peer re-serialises the growing message list at every checkpoint, so its bytes grow faster than "
        "linearly with rounds; its context is the raw history, since it has no write-time compaction. Our context here is the "
        "sum of the stored compacts, before the agent's re-render policy (invariant 10) shrinks older rounds; "
        "with it, long threads stay under the context budget (tests/agent).\n"
    )
    return {
        "title": "Peer: LangGraph PostgresSaver on the same thread",
        "markdown": "\n".join(lines),
        "table": table,
    }
