"""Re-derivation beside replay: events/s of `incident-memory rederive --into NAME`, with 1 and 2
compactor workers, and of `incident-memory replay` of the compacted topic it made, in one run.

The events are seed-shaped threads as `incident.events` carries them (raw tool results: the
compactor works on each), produced once onto a fresh events topic. Each figure is the wall time of
the production command (subprocess: starting the compactor and projector processes included, about
5 s) from its start to its exit, when the new schema holds every row. Recorded selector choices are
shared through a fresh selections changelog, as the live compactor's would be.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from typing import Any

import psycopg
from psycopg import sql

from deploy.local.pipeline import cli, delete_topics, produce
from deploy.local.testdata import raw_threads
from schemas.topics import EVENTS, TOPICS, TopicSpec, ensure_topics
from services.rederive.names import Names, names_for
from services.runtime.settings import Settings

THREADS = int(os.environ.get("BENCH_REDERIVE_THREADS", "2000"))  # x 22 events


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} exited {done.returncode}: {done.stderr[-1500:]}")
    return time.perf_counter() - started


def _rows(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.agent_messages").format(sql.Identifier(schema))
        return int((conn.execute(query).fetchone() or (0,))[0])


def run(settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings.from_env()
    bootstrap, dsn = settings.kafka_bootstrap_servers, settings.database_url
    run_id = uuid.uuid4().hex[:8]
    events_topic, selections = f"bench.rederive.{run_id}.events", f"bench.rederive.{run_id}.selections"
    partitions = next(spec.partitions for spec in TOPICS if spec.name == EVENTS)
    ensure_topics(bootstrap, (TopicSpec(events_topic, partitions),))
    events = raw_threads(THREADS, prefix=f"17{int(run_id, 16) % 100:02d}")
    produce(bootstrap, events_topic, [(e.key(), e.to_bytes()) for e in events], {"linger.ms": 20})
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "DATABASE_URL": dsn,
           "INCIDENT_MEMORY_STATE_DIR": os.path.abspath(f".cache/bench_rederive/{run_id}")}  # fmt: skip
    names: list[Names] = []
    figures: dict[str, Any] = {"events": len(events), "threads": THREADS, "partitions": partitions}
    load_before = os.getloadavg()[0]
    try:
        for workers in (1, 2):
            name = names_for(f"bench_rd_{run_id}_{workers}", events_topic)
            names.append(name)
            seconds = _timed([cli(), "rederive", "--into", name.name, "--events-topic", events_topic,
                              "--selections-topic", selections, "--workers", str(workers), "--no-diff",
                              "--no-progress"], env)  # fmt: skip
            figures[f"rederive_{workers}_workers_s"] = round(seconds, 1)
            figures[f"rederive_{workers}_workers_events_per_s"] = round(len(events) / seconds)
            figures[f"rows_{workers}"] = _rows(dsn, name.schema)
        replay_schema = f"bench_rd_{run_id}_replay"
        seconds = _timed([cli(), "replay", "--from-beginning", "--into", replay_schema, "--topic",
                          names[0].compacted_topic, "--dlq-topic", names[0].dlq_topic, "--group",
                          f"bench.rederive.{run_id}.replay", "--no-progress"], env)  # fmt: skip
        figures["replay_s"] = round(seconds, 1)
        figures["replay_events_per_s"] = round(len(events) / seconds)
        figures["rows_replay"] = _rows(dsn, replay_schema)
    finally:
        figures["load_average_before_after"] = (round(load_before, 2), round(os.getloadavg()[0], 2))
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in [n.schema for n in names] + [f"bench_rd_{run_id}_replay"]:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        doomed = [events_topic, selections, *(t for n in names for t in (n.compacted_topic, n.dlq_topic))]
        delete_topics(bootstrap, doomed)
    one = figures["rederive_1_workers_events_per_s"]
    md = (
        "## Re-derivation beside replay\n\n"
        f"{len(events):,} events ({THREADS:,} seed-shaped threads with raw tool results, {partitions} partitions) "
        "re-derived from the beginning of a fresh events topic by `incident-memory rederive --into NAME "
        "--no-diff` (compactor subprocesses with their own app id -> a fresh compacted topic -> the projector "
        "into a fresh schema; wall time from the command's start to its exit, process start-up included), then "
        "that compacted topic replayed by `incident-memory replay --from-beginning` into an empty schema.\n\n"
        "| figure | value |\n|---|---:|\n"
        f"| rederive, 1 compactor worker | **{one:,} events/s** ({figures['rederive_1_workers_s']} s, "
        f"{figures['rows_1']:,} rows) |\n"
        f"| rederive, 2 compactor workers | {figures['rederive_2_workers_events_per_s']:,} events/s "
        f"({figures['rederive_2_workers_s']} s, {figures['rows_2']:,} rows) |\n"
        f"| replay of the re-derived compacted topic | **{figures['replay_events_per_s']:,} events/s** "
        f"({figures['replay_s']} s, {figures['rows_replay']:,} rows) |\n"
        f"| replay / rederive (1 worker) | {figures['replay_events_per_s'] / one:.0f}x |\n"
        f"| load average before / after (2 cores, shared) | {figures['load_average_before_after'][0]} / "
        f"{figures['load_average_before_after'][1]} |\n\n"
        "The compactor bounds a re-derivation (every tool result is compacted again); on 2 shared cores a "
        "second worker shares the same cores with the first, the projector and the broker. On a cluster each "
        'worker brings its own core, up to the events topic\'s partition count (docs/rederive.md, "Scale").\n'
    )
    return {**figures, "title": "Re-derivation beside replay", "markdown": md}


if __name__ == "__main__":
    result = run()
    print(result.pop("markdown"))
