"""`incident-memory rederive` on the real stack (reliability: `make test-reliability`, not `make test`).

A live pipeline (compactor + projector subprocesses) projects a soak's threads; then:
- a compactor version change (a COMPACTOR_PLUGINS Loki v2) re-derives every thread into a new schema,
  beside the live one, and the diff names the changed rows and loses no fact;
- the planted regression (a version that drops the counts) is caught in the diff, row by row;
- kill -9 of the whole run mid-way, then the same command again, ends equal to an uninterrupted run;
- a switch of the readers' views, back and forth, under a stream of context loads, never shows a
  reader a mix of the two projections; `--switch previous` and `--drop-old`.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka.admin import AdminClient
from psycopg import sql

from deploy.local.pipeline import fresh_schema, fresh_topics
from schemas import read_model
from schemas.events import ToolResult

from .harness import Pipeline, Proc, expected_ids, produce_events, raw_threads, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

CLI = str(Path(sys.executable).parent / "incident-memory")
REPO = Path(__file__).resolve().parents[2]
THREADS = 60  # x 22 events
BUDGETS = json.dumps({"query_loki": 150})  # small, so `_many_patterns` needs the selector
SELECTOR_RAWS = 6
HONEST = "tests.rederive.plugin_compactors:draft"
REGRESSION = "tests.rederive.plugin_compactors:draft_drops_count"


class Live:
    def __init__(self, pipe: Pipeline, events: list[Any], tmp: Path) -> None:
        self.pipe, self.events, self.tmp = pipe, events, tmp
        self.names: list[str] = []

    def env(self, plugin: str | None) -> dict[str, str]:
        env = {
            **self.pipe.env,
            "PYTHONPATH": str(REPO),
            "INCIDENT_MEMORY_STATE_DIR": str(self.tmp / "state"),
            "COMPACTOR_BUDGETS": BUDGETS,
        }
        if plugin is not None:  # a new compactor version for query_loki
            env["COMPACTOR_PLUGINS"] = json.dumps({"loki_next": plugin})
            env["COMPACTOR_TOOL_MAP"] = json.dumps({"query_loki": "loki_next"})
        return env

    def argv(self, name: str, *extra: str) -> list[str]:
        if name not in self.names:
            self.names.append(name)
        return [CLI, "rederive", "--into", name, "--events-topic", self.pipe.topics["events"],
                "--selections-topic", self.pipe.names.selections, "--against", self.pipe.schema,
                "--report", str(self.tmp / f"{name}.json"), *extra]  # fmt: skip

    def rederive(
        self, name: str, plugin: str | None = HONEST, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(name, *extra), env=self.env(plugin), capture_output=True, text=True, timeout=600
        )

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *argv], env=self.pipe.env, capture_output=True, text=True, timeout=120)

    def rows(self, schema: str) -> dict[str, tuple[Any, ...]]:
        with psycopg.connect(self.pipe.dsn, autocommit=True) as conn:
            query = sql.SQL("SELECT id, thread_ts, role, content, compact, tokens FROM {}.agent_messages")
            return {r[0]: r[1:] for r in conn.execute(query.format(sql.Identifier(schema)))}


@pytest.fixture(scope="module")
def live(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("rederive")
    with fresh_topics(stack.kafka_bootstrap_servers) as names, fresh_schema(stack.database_url) as schema:
        pipe = Pipeline(stack.kafka_bootstrap_servers, stack.database_url, schema, names, tmp)
        events = raw_threads(THREADS, prefix=f"17{uuid.uuid4().int % 100:02d}")
        live = Live(pipe, events, tmp)
        try:
            pipe.compactor(env={"COMPACTOR_BUDGETS": BUDGETS})
            pipe.projector()
            staged = _selector_raws()
            produce_events(pipe.bootstrap, names["events"], [*events, *staged])
            expected = expected_ids(events)
            wait_until(lambda: expected <= set(pipe.ids()), 300, "the soak projected")

            def all_staged() -> bool:  # the live compactor has asked, and recorded, every choice
                with pipe.connect() as conn:
                    ids = [e.message_id for e in staged]
                    found = conn.execute("SELECT count(*) FROM round_staging WHERE id = ANY(%s)", (ids,))
                    return (found.fetchone() or (0,))[0] == len(ids)

            wait_until(all_staged, 120, "the selector's digests staged")
            pipe.stop_all()  # the soak is projected; the live schema stays as the readers' "before"
            yield live
        finally:
            pipe.stop_all()
            _cleanup(stack, live.names, [pipe.names.selections])


def _many_patterns(n: int) -> dict[str, Any]:
    """A Loki answer of `n` lines, each its own pattern: over the small budget it needs the selector."""
    words = [f"w{i:02d}" for i in range(n)]
    values = [
        [str(1773457200000000000 + i * 10**9), f"info worker finished {' '.join(words[: i + 1])}"]
        for i in range(n)
    ]
    return {
        "status": "success",
        "data": {"resultType": "streams", "result": [{"stream": {"app": "x"}, "values": values}]},
    }


def _selector_raws() -> list[Any]:
    """Tool results (of a round never committed: staged, not visible) whose digests ask the selector."""
    from datetime import UTC, datetime

    ts = f"18{uuid.uuid4().int % 10**8:08d}.000100"
    return [
        ToolResult(
            thread_ts=ts,
            message_id=f"{ts}:1:tools:{i}",
            event_time=datetime(2026, 3, 14, tzinfo=UTC),
            round=1,
            tool_call_id=f"call_{i}",
            tool="query_loki",
            args={"i": i},
            raw=_many_patterns(30 + i),
            alert_context={"service": "checkout-api"},
        )
        for i in range(SELECTOR_RAWS)
    ]


def _selector_calls(stdout: str) -> int:
    return int(stdout.split("the selector was asked ", 1)[1].split(" ", 1)[0].replace(",", ""))


def _cleanup(stack: Any, names: list[str], topics: list[str]) -> None:
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap_servers})
    doomed = [*topics, *(t for n in names for t in (f"incident.compacted.{n}", f"incident.dlq.{n}"))]
    if doomed:
        for future in admin.delete_topics(doomed, operation_timeout=10).values():
            with contextlib.suppress(Exception):
                future.result(timeout=15)


def _tool_ids(live: Live) -> set[str]:
    return {e.message_id for e in live.events if e.type == "tool_result"}


# --- a version change, and the planted regression -------------------------------------------------


def test_a_version_change_rederives_every_thread_and_the_diff_names_the_changed_rows(live: Live) -> None:
    name = f"rd_{uuid.uuid4().hex[:8]}"
    done = live.rederive(name)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stderr[-1500:], done.stdout[-3000:], sep="\n")
    assert "context diff" in done.stdout
    assert _selector_calls(done.stdout) == SELECTOR_RAWS, (
        "a new version asks the selector again, once per digest"
    )
    assert "ETA" in done.stderr  # progress lines
    before, after = live.rows(live.pipe.schema), live.rows(name)
    assert set(after) == set(before)  # every thread, every row
    tools = _tool_ids(live)
    assert {i for i in after if after[i][1] == "tool"} == tools
    assert all(after[i][3]["format"] == "loki/2" for i in tools)
    report = json.loads((live.tmp / f"{name}.json").read_text())
    assert set(report["total"]["changed"]) == tools
    assert report["total"]["lost_fact_count"] == 0 and report["total"]["regressions"] == 0
    assert len(report["threads"]) == THREADS
    assert report["total"]["tokens_after"] > report["total"]["tokens_before"]  # the added header
    live.honest = name  # type: ignore[attr-defined]


def test_the_planted_regression_a_compactor_that_drops_a_count_is_caught(live: Live) -> None:
    name = f"rg_{uuid.uuid4().hex[:8]}"
    done = live.rederive(name, REGRESSION)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout[-2500:])
    report = json.loads((live.tmp / f"{name}.json").read_text())
    tools = _tool_ids(live)
    lost = report["total"]["lost_facts"]
    assert set(lost) == tools, "every Loki digest lost its line count"
    assert all(
        {"kind": "count", "value": "5"} in [{k: f[k] for k in ("kind", "value")} for f in v]
        for v in lost.values()
    )
    assert "lost  " in done.stdout and "count 5" in done.stdout
    assert report["total"]["tokens_after"] < report["total"]["tokens_before"]


# --- kill -9 mid-way, resume, equal to an uninterrupted run ----------------------------------------


def test_kill_9_mid_rederive_then_the_same_command_resumes_and_ends_equal(live: Live) -> None:
    honest = getattr(live, "honest", None)
    if honest is None:
        pytest.skip("needs the uninterrupted run of the first test")
    name = f"rk_{uuid.uuid4().hex[:8]}"
    proc = Proc("rederive", live.argv(name, "--no-diff"), live.env(HONEST), live.tmp / f"{name}.log").start()
    try:

        def some_rows() -> bool:
            try:
                n = len(live.rows(name))
            except psycopg.Error:
                return False
            return n > 0

        wait_until(some_rows, 300, "the interrupted run to project something", every=0.2, watch=[proc])
        partial = len(live.rows(name))
    finally:
        proc.kill9(group=True)  # the command and every child it started, at once
    assert partial < len(live.rows(honest)), "killed too late to show a resume"
    early = live.cli("rederive", "--switch", name, "--views", f"v_{uuid.uuid4().hex[:8]}")
    assert early.returncode == 1 and len(early.stderr.strip().splitlines()) == 1, early.stderr
    assert "is not caught up: its rederive has not finished" in early.stderr
    done = live.rederive(name)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" in done.stderr
    assert live.rows(name) == live.rows(honest)


def test_bad_requests_on_the_stack_get_one_line(live: Live) -> None:
    for argv, words in [
        (
            ["rederive", "--into", "nosuchtopic", "--events-topic", f"nope.{uuid.uuid4().hex[:6]}"],
            "does not exist",
        ),
        (
            ["rederive", "--switch", "previous", "--views", f"v_{uuid.uuid4().hex[:8]}"],
            "no previous projection",
        ),
        (["rederive", "--drop-old", "--views", f"v_{uuid.uuid4().hex[:8]}"], "no previous projection"),
        (["rederive", "--diff", "nosuchschema", "--against", live.pipe.schema], "does not exist"),
        (["rederive", "--switch", live.pipe.schema, "--views", live.pipe.schema], "cannot be the projection"),
        (["rederive", "--switch", live.pipe.schema, "--views", "public"], "is a table, not a view"),
    ]:
        done = live.cli(*argv)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and words in lines[0], (argv, done.stderr)


def test_an_unchanged_compactor_version_reuses_every_recorded_choice(live: Live) -> None:
    name = f"ru_{uuid.uuid4().hex[:8]}"
    done = live.rederive(name, None, "--no-diff")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _selector_calls(done.stdout) == 0, "the live compactor recorded these choices: none asked again"
    assert live.rows(name) == live.rows(live.pipe.schema)  # the same version re-derives the same context


def test_follow_keeps_the_new_projection_live_and_ctrl_c_stops_it(live: Live) -> None:
    """--follow after catching up: new events reach the new schema, a reader of the views (pointed at
    it) is woken by the projector's notice, and Ctrl-C (SIGINT) stops the run and its children."""
    name = f"rf_{uuid.uuid4().hex[:8]}"
    views = f"v_{uuid.uuid4().hex[:8]}"
    live.names.append(views)
    argv = live.argv(name, "--no-diff", "--follow")
    out, err_log = live.tmp / f"{name}.out", live.tmp / f"{name}.err"
    proc = Proc("rederive", argv, live.env(HONEST), out, err_log=err_log).start()
    try:

        def caught_up() -> bool:
            try:
                with psycopg.connect(live.pipe.dsn, autocommit=True) as conn:
                    query = sql.SQL("SELECT caught_up_at FROM {}.rederive_run").format(sql.Identifier(name))
                    row = conn.execute(query).fetchone()
            except psycopg.Error:
                return False
            return row is not None and row[0] is not None

        wait_until(caught_up, 300, "the run to catch up", 0.5, watch=[proc])
        switched = live.cli("rederive", "--switch", name, "--views", views)
        assert switched.returncode == 0, switched.stderr
        late = raw_threads(1, prefix=f"19{uuid.uuid4().int % 100:02d}")
        trigger = late[0]
        waiting: dict[str, bool] = {}
        waiter = threading.Thread(
            target=lambda: waiting.update(
                ok=read_model.wait_until_projected(
                    live.pipe.dsn, trigger.thread_ts, trigger.message_id, 120, views
                )
            )
        )
        waiter.start()
        time.sleep(0.5)
        produce_events(live.pipe.bootstrap, live.pipe.topics["events"], late)
        waiter.join(150)
        assert waiting.get("ok") is True
        expected = expected_ids(late)
        wait_until(
            lambda: expected <= set(_safe_rows(live, name)),
            120,
            "the late thread in the new schema",
            0.5,
            watch=[proc],
        )
    finally:
        code = proc.stop(90, signal.SIGINT, group=True)  # Ctrl-C reaches the whole foreground group
    err = proc.err_text()
    assert code == 130, err[-2000:]
    assert "rerun the same command to resume" in err
    assert "following the live tail" in err


def _safe_rows(live: Live, schema: str) -> dict[str, tuple[Any, ...]]:
    try:
        return live.rows(schema)
    except psycopg.Error:
        return {}


# --- the switch -----------------------------------------------------------------------------------


def _context(conn: psycopg.Connection, thread_ts: str) -> tuple[Any, ...]:
    return (
        tuple(conn.execute(read_model.CONTEXT_ROWS, (thread_ts,)).fetchall()),
        tuple(conn.execute(read_model.THREAD_TABLE, (thread_ts,)).fetchall()),
    )


def test_a_switch_under_a_stream_of_reads_never_shows_a_mix(live: Live) -> None:
    honest = getattr(live, "honest", None)
    if honest is None:
        pytest.skip("needs the re-derived schema of the first test")
    views = f"v_{uuid.uuid4().hex[:8]}"
    live.names.append(views)
    old = live.pipe.schema
    threads = sorted({e.thread_ts for e in live.events})[:8]
    expected: dict[str, dict[str, tuple[Any, ...]]] = {}
    for schema in (old, honest):
        with psycopg.connect(live.pipe.dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
            expected[schema] = {t: _context(conn, t) for t in threads}
    assert all(expected[old][t] != expected[honest][t] for t in threads)

    bad = live.cli("rederive", "--switch", "nosuchschema", "--views", views)
    assert (
        bad.returncode == 1 and "does not exist" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    )
    first = live.cli("rederive", "--switch", old, "--views", views)
    assert first.returncode == 0, first.stderr

    stop = threading.Event()
    seen: dict[str, int] = {old: 0, honest: 0}
    mixed: list[str] = []
    errors: list[str] = []

    def reader(k: int) -> None:
        with psycopg.connect(live.pipe.dsn, autocommit=True, options=f"-c search_path={views}") as conn:
            i = k
            while not stop.is_set():
                t = threads[i % len(threads)]
                i += 1
                try:
                    got = _context(conn, t)
                except psycopg.Error as exc:
                    errors.append(str(exc))
                    continue
                # Each statement on its own must be all old or all new.
                for part in (0, 1):
                    which = [s for s in (old, honest) if expected[s][t][part] == got[part]]
                    if not which:
                        mixed.append(f"{t} statement {part}")
                    else:
                        seen[which[0]] += 1

    readers = [threading.Thread(target=reader, args=(k,), daemon=True) for k in range(4)]
    for r in readers:
        r.start()
    try:
        for target in [honest, old] * 3 + [honest]:
            time.sleep(0.5)
            done = live.cli("rederive", "--switch", target, "--views", views)
            assert done.returncode == 0, done.stderr
    finally:
        time.sleep(0.5)
        stop.set()
        for r in readers:
            r.join(30)
    assert not mixed, mixed[:5]
    assert not errors, errors[:3]
    assert seen[old] > 0 and seen[honest] > 0
    back = live.cli("rederive", "--switch", "previous", "--views", views)
    assert back.returncode == 0 and f"now read {old!r}" in back.stdout, back.stderr
    with psycopg.connect(live.pipe.dsn, autocommit=True, options=f"-c search_path={views}") as conn:
        assert _context(conn, threads[0]) == expected[old][threads[0]]
    forward = live.cli("rederive", "--switch", honest, "--views", views)
    assert forward.returncode == 0, forward.stderr
    # The previous projection (the test's live schema) is dropped; the active one stays.
    dropped = live.cli("rederive", "--drop-old", "--views", views)
    assert dropped.returncode == 0, dropped.stderr
    with psycopg.connect(live.pipe.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (old,)).fetchone() is None
