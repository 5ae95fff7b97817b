"""End to end on loopback: a signed Slack message at ingest -> its row visible in Postgres.

ingest, compactor and projector run as subprocesses (the same commands as production) on fresh
per-run topics and a fresh schema, once per load (100 msg/s, then 1,000 msg/s). Each message is
timed from just before its HTTP request to the arrival of the projector's NOTIFY for its thread
(sent in the transaction that makes the row readable), the row then confirmed by a SELECT. The hops
come from the Kafka record timestamps the producers set (CreateTime, milliseconds): ingest's on the
events topic, the compactor's on the compacted topic. All stamps are wall-clock (`time.time()`), so
they compare with Kafka's.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import statistics
import time
import uuid
from collections.abc import Iterable, Mapping
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from psycopg import sql

from benchmarks.http_load import load, run_loop, signed_slack_request
from benchmarks.proc_cpu import cores_between, pids_named, snapshot, waited_seconds
from deploy.local import kafka_node
from deploy.local.demo import APP_ID, BOT_USER_ID, CHANNEL, TEAM_ID, slack_envelope, slack_event
from deploy.local.pipeline import Names, Pipeline
from schemas.ids import thread_key
from schemas.read_model import NOTIFY_CHANNEL
from services.runtime.settings import Settings

LOADS = (
    (2000, 100.0),
    (5000, 500.0),
    (10000, 1000.0),
)  # (messages, per second), open loop; 500/s shows the knee
# Before each timed load, this many messages at 100/s through the same services and topics, waited for
# until visible. The topics are fresh per load, and a fresh partition stalls its first reads and writes
# for up to a second once it first passes Kafka's index interval (4 KiB: about 1.5 s into a 100/s load,
# reproduced with plain librdkafka clients and no service of ours); production topics are not fresh.
WARM_UP = 400
THREADS = 50
DRAIN_AT_MOST = 500  # notices read before their rows are confirmed (under load, each is still stamped)
UNBOUNDED = 2**62  # a notice without max_seq covers whatever its thread has
CONNECTIONS = 64  # keep-alive connections of the load generator (as the ingest bench)


def _listen(dsn: str, schema: str, ready: Event, done: Event, out: Connection) -> None:
    """In a process of its own, so no thread of the load generator delays a stamp (a thread waiting
    for the GIL waits up to its 5 ms switch interval): when the projector's notice for a row
    arrived. Sends {id: first arrival} back when `done`.

    Each notice is stamped as it is read off the connection (its rows are readable then: NOTIFY is
    sent in their transaction). The notices waiting at that moment are read too, each stamped, and
    then ONE query confirms the rows of all of them: a query per notice was hundreds a second at
    1,000 msg/s, the benchmark's own load on the cores it shares with the pipeline. A notice carries
    its thread's highest seq when it was sent, so a row is stamped by the first notice that covers
    it, never by an earlier one (a row committed after that notice waits for its own)."""
    seen: dict[str, float] = {}
    read_up_to: dict[str, int] = {}  # per thread, the highest seq already stamped
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
        query = sql.SQL(
            "SELECT m.thread_ts, m.id, m.seq FROM {}.agent_messages m"
            " JOIN unnest(%s::text[], %s::bigint[], %s::bigint[]) AS t(ts, after, upto)"
            " ON m.thread_ts = t.ts AND m.seq > t.after AND m.seq <= t.upto"
        ).format(sql.Identifier(schema))
        ready.set()
        while not done.is_set():
            # thread -> [(max_seq, arrival)], in arrival order
            covers: dict[str, list[tuple[int, float]]] = {}
            batch = list(conn.notifies(timeout=0.2, stop_after=1))
            for _ in range(DRAIN_AT_MOST):
                if not batch:
                    break
                for n in batch:
                    at = time.time()
                    try:
                        payload = json.loads(n.payload)
                    except ValueError:
                        continue
                    if payload.get("schema", schema) == schema and payload.get("thread_ts"):
                        upto = payload.get("max_seq")
                        covers.setdefault(str(payload["thread_ts"]), []).append(
                            (int(upto) if upto is not None else UNBOUNDED, at)
                        )
                batch = list(conn.notifies(timeout=0.0))  # the ones already waiting, one at a time
            if not covers:
                continue
            threads = list(covers)
            after = [read_up_to.get(ts, 0) for ts in threads]
            upto = [max(s for s, _ in covers[ts]) for ts in threads]
            rows = conn.execute(query, (threads, after, upto)).fetchall()
            for mid, at in stamps(covers, rows).items():
                seen.setdefault(mid, at)
            for ts, _mid, seq in rows:
                read_up_to[ts] = max(read_up_to.get(ts, 0), seq)
    out.send(seen)
    out.close()


def stamps(
    covers: Mapping[str, list[tuple[int, float]]], rows: Iterable[tuple[str, str, int]]
) -> dict[str, float]:
    """Row id -> the arrival of the first notice of its thread whose max_seq covers the row's seq.
    `covers`: thread -> [(max_seq, arrival)] in arrival order; `rows`: (thread, id, seq), each
    covered by some notice of its thread (the query reads no further than the highest)."""
    return {mid: next(at for top, at in covers[ts] if top >= seq) for ts, mid, seq in rows}


def _requests(secret: str, run_id: str, n: int, first_ts: int = 1773460000) -> tuple[list[str], list[bytes]]:
    """Every message's (channel, ts) key and its signed request, built before the clock starts."""
    threads = [f"17734{i:05d}.000100" for i in range(THREADS)]
    keys, requests = [], []
    for i in range(n):
        thread_ts = threads[i % THREADS]
        ts = f"{first_ts + i}.{i % 1000000:06d}"
        event = slack_event("message", thread_ts, ts, "U0BENCH", f"bench {i}")
        body = json.dumps(slack_envelope(event, f"Ev{run_id}{i:06d}")).encode()
        keys.append(f"{thread_key(CHANNEL, thread_ts)}:-:human:{ts}")
        requests.append(signed_slack_request(secret, body))
    return keys, requests


def _refusal(status: int) -> str | None:
    return None if status == 200 else "no answer in 10 s" if status < 0 else f"HTTP {status}"


def _rows(pipe: Pipeline) -> int:
    with pipe.connect() as conn:
        row = conn.execute("SELECT count(*) FROM agent_messages").fetchone()
    return int(row[0]) if row else 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _phase(settings: Settings, messages: int, rate: float) -> dict[str, Any]:
    """One load on fresh services, topics and schema: latencies, hops, throughput, load average."""
    run_id = uuid.uuid4().hex[:8]
    names = Names.fresh(f"bench.{run_id}", f"bench_{run_id}")
    secret = secrets.token_hex(16)
    pipe = Pipeline(
        settings.kafka_bootstrap_servers,
        settings.database_url,
        names.schema,
        names.topics,
        Path(".cache/bench_e2e") / run_id,
        prefix=names.prefix,
        extra_env={
            "SLACK_SIGNING_SECRET": secret,
            "ALERTMANAGER_TOKEN": secrets.token_hex(8),
            "SLACK_BOT_USER_ID": BOT_USER_ID,
            "SLACK_TEAM_ID": TEAM_ID,
            "SLACK_APP_ID": APP_ID,
        },
    )
    pipe.provision()
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    refused: dict[str, int] = {}
    spawn = multiprocessing.get_context("spawn")
    ready, done = spawn.Event(), spawn.Event()
    receive, send_back = spawn.Pipe(duplex=False)
    listener = spawn.Process(
        target=_listen, args=(settings.database_url, names.schema, ready, done, send_back)
    )
    try:
        ingest = pipe.ingest(schema=False)
        compactor = pipe.compactor()
        projector = pipe.projector()
        pipe.wait_ready(timeout=60)
        listener.start()
        if not ready.wait(30):
            raise RuntimeError("the notice listener did not start")
        time.sleep(0.3)  # let LISTEN take effect before the first commit
        assert ingest.port is not None
        _keys, warm = _requests(secret, f"W{run_id.upper()}", WARM_UP, first_ts=1773400000)
        run_loop(load(ingest.port, warm, 100.0, CONNECTIONS))
        pipe.wait_until(lambda: _rows(pipe) >= WARM_UP, 60, "the warm-up visible")
        keys, requests = _requests(secret, run_id.upper(), messages)
        groups = _cpu_groups(settings, {"ingest": ingest.pid, "compactor": compactor.pid,
                                        "projector": projector.pid, "listener": listener.pid or 0})  # fmt: skip
        cpu_before, wait_before = snapshot(groups), snapshot(groups, waited_seconds)
        load_started = time.time()
        outcome = run_loop(load(ingest.port, requests, rate, CONNECTIONS))
        send_s = outcome.elapsed
        for key, status, at in zip(keys, outcome.statuses, outcome.sent_at, strict=True):
            why = _refusal(status)
            if why is None:
                sent[key] = at
            else:  # overload: counted, never timed as if it had landed
                refused[why] = refused.get(why, 0) + 1
        pipe.wait_until(lambda: _rows(pipe) >= WARM_UP + len(sent), 60, "all rows visible")
        load_ended = time.time()
        cores = cores_between(cpu_before, snapshot(groups), load_ended - load_started)
        waited = cores_between(wait_before, snapshot(groups, waited_seconds), load_ended - load_started)
        time.sleep(0.5)  # the last notices reach the listener
    finally:
        try:
            done.set()
            if receive.poll(15):
                seen = {m: at for m, at in receive.recv().items() if m in sent}
            if listener.pid is not None:
                listener.join(timeout=5)
                if listener.is_alive():
                    listener.kill()
        finally:
            pipe.stop_all()
    try:
        produced = _record_times(settings.kafka_bootstrap_servers, names.topics["events"], set(sent))
        compacted = _record_times(settings.kafka_bootstrap_servers, names.topics["compacted"], set(sent))
    finally:
        pipe.deprovision()
    pauses = _broker_gc_pauses(settings, load_started, load_ended)
    lat = [(seen[m] - sent[m]) * 1000 for m in sent if m in seen]
    hops = {
        "ingest_ms": [produced[m] - sent[m] * 1000 for m in sent if m in produced],
        "compactor_ms": [compacted[m] - produced[m] for m in sent if m in compacted and m in produced],
        "projector_ms": [seen[m] * 1000 - compacted[m] for m in sent if m in seen and m in compacted],
    }
    t0 = min(sent.values())
    # The ten slowest, with when they were sent and their hops: where a stall was, for whoever reads
    # benchmarks/results.json (the table shows percentiles only).
    slowest = sorted(
        (
            [round(sent[m] - t0, 2), round((seen[m] - sent[m]) * 1000, 1), round(produced[m] - sent[m] * 1000, 1),
             round(compacted[m] - produced[m], 1), round(seen[m] * 1000 - compacted[m], 1)]
            for m in sent if m in seen and m in produced and m in compacted
        ),
        key=lambda row: -row[1],
    )[:10]  # fmt: skip
    last = max(seen.values()) - min(sent.values())
    ordered = sorted(sent, key=sent.__getitem__)
    first_second = [m for m in ordered if sent[m] - sent[ordered[0]] < 1.0]
    return {
        "offered": messages,
        "refused": dict(sorted(refused.items())),
        "messages": len(sent),
        "visible": len(lat),
        "target_rate_per_s": rate,
        "achieved_send_rate_per_s": round(len(sent) / send_s, 1),
        "throughput_visible_per_s": round(len(lat) / last, 1),
        "p50_ms": round(statistics.median(lat), 1),
        "p99_ms": round(_pct(lat, 0.99), 1),
        "max_ms": round(max(lat), 1),
        "first_second_max_ms": round(max((seen[m] - sent[m]) * 1000 for m in first_second if m in seen), 1),
        "hops_p50_ms": {k: round(statistics.median(v), 1) for k, v in hops.items() if v},
        "hops_p99_ms": {k: round(_pct(v, 0.99), 1) for k, v in hops.items() if v},
        "load_average_1m": round(os.getloadavg()[0], 2),
        "broker_gc_pauses_ms": pauses,
        "cores_during_load": cores,
        "waited_for_a_core_s_per_s": waited,
        "first_sent_unix_s": round(t0, 3),  # the slowest rows' send times are after it
        "slowest_sent_s_total_ingest_compactor_projector_ms": slowest,
    }


def _local_broker(settings: Settings) -> bool:
    """The run is on the local stack's broker (whose pid and GC log we have), not another machine's."""
    return settings.kafka_bootstrap_servers == kafka_node.bootstrap()


def _broker_gc_pauses(settings: Settings, since: float, until: float) -> list[float] | None:
    """The local broker's GC pauses (ms) during the load, from its GC log; None for another broker."""
    log = kafka_node.paths().gc_log
    if not _local_broker(settings) or not log.is_file():
        return None
    return kafka_node.gc_pauses(log.read_text(errors="replace"), since, until)


def _cpu_groups(settings: Settings, services: dict[str, int]) -> dict[str, list[int]]:
    """Whose CPU to count during a load: our services, this process (the load generator), and the
    local stack's broker and PostgreSQL (not another machine's)."""
    groups = {name: [pid] for name, pid in services.items() if pid}
    groups["load generator"] = [os.getpid()]
    if _local_broker(settings):
        broker = kafka_node.running_pid(kafka_node.paths())
        groups["broker"] = [broker] if broker else []
        groups["postgres"] = pids_named("postgres")
    return groups


def _cores_cell(cores: dict[str, float]) -> str:
    return ", ".join(f"{name} {used:.2f}" for name, used in sorted(cores.items(), key=lambda kv: -kv[1])) + (
        f"; total {sum(cores.values()):.2f} of {os.cpu_count()}"
    )


def _targets(phases: dict[str, dict[str, Any]]) -> str:
    """Issue 20's targets against this run's figures."""
    low, high = phases.get("100_per_s"), phases.get("1000_per_s")
    out = []
    if low is not None:
        met = low["p99_ms"] <= 15 and low["max_ms"] <= 60
        out.append(
            f"100/s p99 <= 15 ms and max <= 60 ms: {'met' if met else 'NOT met'} ({low['p99_ms']} / {low['max_ms']})"
        )
    if high is not None:
        met = high["p99_ms"] <= 50
        out.append(f"1,000/s p99 <= 50 ms: {'met' if met else 'NOT met'} ({high['p99_ms']})")
    return "Targets: " + "; ".join(out) + "."


def _waits_cell(waited: dict[str, float]) -> str:
    return ", ".join(f"{name} {w:.2f}" for name, w in sorted(waited.items(), key=lambda kv: -kv[1]))


def _pauses_cell(pauses: list[float] | None) -> str:
    if pauses is None:
        return "n/a"
    return f"{len(pauses)}, max {max(pauses):.1f}" if pauses else "0"


def _record_times(bootstrap: str, topic: str, wanted: set[str]) -> dict[str, float]:
    """message_id -> the record's CreateTime (ms since the epoch), for the messages sent."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
        found: dict[str, float] = {}
        idle_until = time.monotonic() + 5
        while len(found) < len(wanted) and time.monotonic() < idle_until:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is not None or not message.value():
                    continue
                idle_until = time.monotonic() + 5
                mid = json.loads(message.value() or b"{}").get("message_id")
                if mid in wanted:
                    found.setdefault(mid, float(message.timestamp()[1]))
        return found
    finally:
        consumer.close()


def run(settings: Settings) -> dict[str, Any]:
    phases = {f"{rate:.0f}_per_s": _phase(settings, messages, rate) for messages, rate in LOADS}
    rows = []
    for phase in phases.values():
        p50, p99 = phase["hops_p50_ms"], phase["hops_p99_ms"]
        rows.append(
            f"| {phase['target_rate_per_s']:.0f}/s ({phase['achieved_send_rate_per_s']} accepted/s) "
            f"| {phase['messages']:,} of {phase['offered']:,} "
            f"({', '.join(f'{n:,} {why}' for why, n in phase['refused'].items()) or 'none refused'}) "
            f"| {phase['p50_ms']} | {phase['p99_ms']} | {phase['max_ms']} | {phase['first_second_max_ms']} "
            f"| {phase['throughput_visible_per_s']} "
            f"| {p50.get('ingest_ms')} / {p99.get('ingest_ms')} | {p50.get('compactor_ms')} / {p99.get('compactor_ms')} "
            f"| {p50.get('projector_ms')} / {p99.get('projector_ms')} | {_pauses_cell(phase['broker_gc_pauses_ms'])} "
            f"| {phase['load_average_1m']} |"
        )
    md = (
        "## End to end: Slack message at ingest -> row visible in Postgres\n\n"
        f"Signed Slack messages over {THREADS} threads (open loop), through ingest -> Kafka -> compactor "
        "(faust) -> Kafka -> projector -> Postgres, all on loopback, on fresh services per load. Each message "
        "is timed from just before its HTTP request to the arrival of the projector's NOTIFY for its thread "
        "(its row then confirmed by a SELECT). Hops from the Kafka record timestamps (CreateTime, whole "
        "milliseconds): ingest = request sent -> ingest's produce; compactor = ingest's produce -> the "
        "compactor's; projector = the compactor's produce -> notice. The load generator shares the 2 cores. "
        "Latencies are of the accepted messages; a refused one (ingest's 503 at its concurrency limit, or a "
        "request not answered within 10 s) is counted, never timed. The load generator is the ingest bench's "
        "(benchmarks/http_load.py: requests built and signed before the clock starts, 64 keep-alive "
        f"connections); the notices are stamped in a process of its own. Before each load, {WARM_UP} messages at "
        "100/s pass through the same services and topics, untimed (see WARM_UP in benchmarks/bench_e2e.py: a "
        "fresh topic's first seconds).\n\n"
        "| load | accepted (refused) | p50 ms | p99 ms | max ms | max in the first second | rows visible/s "
        "| ingest p50/p99 | compactor p50/p99 | projector p50/p99 | broker GC pauses (n, max ms) | load avg 1m |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Where the cores went during each timed load (CPU seconds of each process over the load's wall "
        "seconds, from /proc; the broker and PostgreSQL only on the local stack):\n\n"
        "| load | cores used | CPU per message, all processes | waited for a core (s per s) |\n|---|---|---:|---|\n"
        + "".join(
            f"| {p['target_rate_per_s']:.0f}/s | {_cores_cell(p['cores_during_load'])} "
            f"| {sum(p['cores_during_load'].values()) / p['achieved_send_rate_per_s'] * 1000:.2f} ms "
            f"| {_waits_cell(p['waited_for_a_core_s_per_s'])} |\n"
            for p in phases.values()
        )
        + "\n"
        "Waited for a core: the time each process's threads were ready to run but queued for one of the "
        "2 cores (the scheduler's run queue, /proc/<pid>/task/*/schedstat), per second of load. Where it "
        "is near or above a process's cores used, that process spends as long waiting for the CPU as "
        "running: the cores are oversubscribed, and the queue of records builds at whichever hop waits. "
        "CPU per message falls as the rate rises: every process pays a fixed cost per wake-up (a fetch, a "
        "produce request, a transaction), and at higher rates each wake-up carries more messages.\n\n"
        + _targets(phases)
        + "\n\n"
        "Broker GC pauses: the local broker's G1 pauses that ended during the timed load, from its GC log "
        "(deploy/local/kafka_node.py, `-Xlog:gc` as kafka-server-start.sh's `-loggc`). Every request in "
        "flight waits out a pause, in both Kafka hops. When this was looked into (2026-12-03), the slowest "
        "messages of a load at 100/s lined up with the pauses to the millisecond (each load's slowest, "
        "with their send times, are in benchmarks/results.json).\n\n"
        "Earlier figures here were wrong: until 2026-12-03 09:21 each row was stamped when a 0.2 s wait for "
        "notices ended, not when its notice arrived (p50 137 ms and p99 341 ms were mostly that wait).\n"
    )
    return {**phases, "title": "End to end", "markdown": md}
