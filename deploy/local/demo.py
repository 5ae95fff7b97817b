"""`incident-memory demo`: the seed incident end to end, through the real services, ending in its table.

Every run gets fresh topics (`demo.<runid>.*`) and a fresh Postgres schema, so the demo can be
run again and again and always shows the seed table. The four services run as separate
processes (logs under .cache/demo/<runid>/) and are always stopped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from deploy.local.ports import free_port
from schemas import topics
from services.runtime.errors import UserFacingError

BOT_USER_ID = "U0BOTMEM1"
CHANNEL = "C0INCIDENT"
LOCAL_MODEL = "local-deterministic"
LOCAL_NOTE = (
    "model: local-deterministic (a deterministic local stand-in behind the LangChain interface, NOT a real LLM; "
    "set OPENAI_BASE_URL/OPENAI_API_KEY/AGENT_MODEL to use a real one)"
)


@dataclass
class Run:
    """One demo run: its names, its processes and its clock."""

    run_id: str
    root: Path
    started: float = field(default_factory=time.monotonic)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def topics(self) -> dict[str, str]:
        return {k: f"demo.{self.run_id}.{k}" for k in ("events", "compacted", "wake", "dlq", "selections")}

    @property
    def schema(self) -> str:
        return f"demo_{self.run_id}"

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def step(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)


def cli() -> str:
    local = Path(sys.executable).with_name("incident-memory")
    return str(local) if local.exists() else "incident-memory"


def wait_for(what: str, check: Callable[[], bool], timeout: float, log: Path | None, run: Run) -> None:
    """Poll `check` until true; a timeout is a one-line error naming the step and the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        for name, proc in run.procs.items():
            if proc.poll() is not None:
                raise UserFacingError(
                    f"step '{what}': {name} exited with {proc.returncode}; see {run.log(name)}"
                )
        time.sleep(0.1)
    where = f"; see {log}" if log else ""
    raise UserFacingError(f"step '{what}' timed out after {timeout:.0f}s{where}")


def _await(check: Callable[[], Any], what: str, timeout: float, run: Run) -> Any:
    """`wait_for` a check that returns its answer (None until then); the answer."""
    found: list[Any] = []

    def done() -> bool:
        value = check()
        if value is not None:
            found.append(value)
        return value is not None

    wait_for(what, done, timeout, run.log("slack"), run)
    return found[0]


def log_has(path: Path, needle: str) -> Callable[[], bool]:
    return lambda: path.exists() and needle in path.read_text(errors="replace")


def start(run: Run, name: str, args: list[str], env: dict[str, str], argv: list[str] | None = None) -> None:
    """Start `incident-memory <name> args` (or `argv`), its output in the run's log of that name."""
    out = run.log(name).open("wb")
    run.procs[name] = subprocess.Popen(
        argv or [cli(), name, *args], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def stop_all(run: Run) -> None:
    for proc in run.procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in run.procs.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def sign(secret: str, body: bytes, timestamp: int) -> str:
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def slack_envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """Slack's documented `event_callback` outer shape."""
    return {
        "token": "demo-verification-token",
        "team_id": "T0DEMO",
        "api_app_id": "A0DEMO",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(float(event["ts"])),
        "authorizations": [{"team_id": "T0DEMO", "user_id": BOT_USER_ID, "is_bot": True}],
    }


def slack_event(
    kind: str, thread_ts: str, ts: str, user: str, text: str, channel: str = CHANNEL
) -> dict[str, Any]:
    return {
        "type": kind,
        "user": user,
        "text": text,
        "ts": ts,
        "thread_ts": thread_ts,
        "channel": channel,
        "event_ts": ts,
        **({"channel_type": "channel"} if kind == "message" else {}),
    }


def post_slack(client: httpx.Client, secret: str, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    now = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": str(now),
        "X-Slack-Signature": sign(secret, body, now),
    }
    resp = client.post("/slack/events", content=body, headers=headers)
    if resp.status_code != 200:
        raise UserFacingError(f"ingest answered {resp.status_code} to a Slack event: {resp.text[:200]}")


@contextmanager
def db(dsn: str, schema: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield conn


def round_posted(dsn: str, schema: str, thread_ts: str, round_: int) -> Callable[[], bool]:
    def check() -> bool:
        with db(dsn, schema) as conn:
            rec = conn.execute(
                "SELECT count(*) FROM agent_messages WHERE thread_ts=%s AND round=%s AND role='post'",
                (thread_ts, round_),
            ).fetchone()
        return bool(rec and rec[0])

    return check


@dataclass(frozen=True)
class SlackSide:
    """Where the bot speaks: our stand-in (started here) or any Slack-compatible API from the env."""

    api_url: str
    bot_token: str
    channel: str
    ours: bool


def slack_side(run: Run, env: dict[str, str], timeout: float) -> SlackSide:
    """SLACK_API_URL + SLACK_BOT_TOKEN (+ SLACK_DEFAULT_CHANNEL) from the environment, else our stand-in."""
    if os.environ.get("SLACK_API_URL"):
        token = os.environ.get("SLACK_BOT_TOKEN", "")
        channel = os.environ.get("SLACK_DEFAULT_CHANNEL", "")
        if not token or not channel:
            raise UserFacingError("with SLACK_API_URL set, set SLACK_BOT_TOKEN and SLACK_DEFAULT_CHANNEL too")
        return SlackSide(os.environ["SLACK_API_URL"], token, channel, ours=False)
    port, token = free_port(), f"xoxb-demo-{secrets.token_hex(8)}"
    argv = [sys.executable, "-m", "deploy.local.slack_standin", "--port", str(port), "--bot-token", token,
            "--app-token", f"xapp-demo-{secrets.token_hex(8)}", "--channel", CHANNEL]  # fmt: skip
    start(run, "slack-standin", [], env, argv)
    side = SlackSide(f"http://127.0.0.1:{port}/api/", token, CHANNEL, ours=True)
    wait_for("Slack stand-in ready", lambda: _auth_ok(side), timeout, run.log("slack-standin"), run)
    return side


def _auth_ok(side: SlackSide) -> bool:
    try:
        answer = httpx.post(
            f"{side.api_url}auth.test", headers={"Authorization": f"Bearer {side.bot_token}"}, timeout=1
        )
        return bool(answer.json().get("ok"))
    except (httpx.HTTPError, ValueError):
        return False


def recorded(dsn: str, schema: str, post_id: str) -> Callable[[], tuple[str, str] | None]:
    """(channel, Slack ts) of a post once the poster's record of it is projected."""

    def check() -> tuple[str, str] | None:
        with db(dsn, schema) as conn:
            row = conn.execute(
                "SELECT channel, slack_ts FROM slack_posts WHERE post_id = %s AND phase <> 'intent'",
                (post_id,),
            ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    return check


def thread_in_slack(side: SlackSide, channel: str, root_ts: str) -> list[dict[str, Any]]:
    """The thread as Slack holds it (conversations.replies, with the metadata tags)."""
    from slack_sdk import WebClient

    web = WebClient(token=side.bot_token, base_url=side.api_url)
    answer = web.conversations_replies(channel=channel, ts=root_ts, include_all_metadata=True, limit=200)
    return [m for m in answer.get("messages") or [] if isinstance(m, dict)]


def model_inputs(agent_log: Path) -> dict[int, list[tuple[str, int]]]:
    """Per round, the (node, input tokens) of each model call, from the agent's 'round committed' logs."""
    out: dict[int, list[tuple[str, int]]] = {}
    for line in agent_log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(rec, dict)
            and rec.get("msg", rec.get("message")) == "round committed"
            and "round" in rec
        ):
            out[int(rec["round"])] = [(str(n), int(t)) for n, t in rec.get("model_inputs") or []]
    return out


def models_used(dsn: str, schema: str, thread_ts: str, agent_log: Path) -> set[str]:
    with db(dsn, schema) as conn:
        recs = conn.execute(
            "SELECT DISTINCT content->>'model' FROM agent_messages WHERE thread_ts=%s AND content ? 'model'",
            (thread_ts,),
        ).fetchall()
    found = {r[0] for r in recs if r[0]}
    if not found and LOCAL_MODEL in agent_log.read_text(errors="replace"):
        found = {LOCAL_MODEL}
    return found


def secure_names(run: Run) -> Any:
    """This run's topics and groups, for the ACLs of the secured node's service principals."""
    from deploy.local import kafka_secure

    t = run.topics
    return kafka_secure.Names(
        events=t["events"],
        compacted=t["compacted"],
        wake=t["wake"],
        dlq=t["dlq"],
        selections=t["selections"],
        groups={service: f"demo.{run.run_id}.{service}" for service in kafka_secure.SERVICES},
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step (default 120)")
    parser.add_argument("--keep-schema", action="store_true", help="accepted for clarity; schemas are kept")
    parser.add_argument("--cache-dir", default=".cache/demo")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="run over the secured stack (`up --secure`): Kafka over SASL_SSL with each service as its own "
        "SCRAM principal under ACLs, Postgres over TLS with sslmode=verify-full",
    )


def run(args: argparse.Namespace) -> int:
    from deploy.local import kafka_secure
    from deploy.local.seed import seed_incident
    from deploy.local.stack import up
    from schemas.migrate import apply_migrations
    from services.projector.show import fetch_rows, render_table
    from services.runtime.kafka import admin_config

    run_ = Run(uuid.uuid4().hex[:8], Path(args.cache_dir) / "")
    run_.root = Path(args.cache_dir) / run_.run_id
    run_.root.mkdir(parents=True, exist_ok=True)
    t = args.timeout
    run_.step(f"run {run_.run_id}: starting the stack (Kafka, PostgreSQL)")
    info = up(secure=args.secure)
    bootstrap = getattr(info, "kafka_bootstrap_servers", None) or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    dsn = getattr(info, "database_url", None) or os.environ.get("DATABASE_URL")
    if not bootstrap or not dsn:
        from services.runtime.settings import Settings

        s = Settings.from_env()
        bootstrap, dsn = bootstrap or s.kafka_bootstrap_servers, dsn or s.database_url
    names = run_.topics
    secure = info.secure_kafka if args.secure else None
    if args.secure and secure is None:
        raise UserFacingError(
            "--secure runs on the local stack's secured Kafka node: unset KAFKA_BOOTSTRAP_SERVERS"
        )
    admin: str | dict[str, Any] = admin_config(secure.client()) if secure else bootstrap
    dsn = (info.verify_full_dsn or dsn) if secure else dsn
    parts = {spec.name: spec.partitions for spec in topics.TOPICS}
    specs = tuple(
        topics.TopicSpec(names[k], parts[base])
        for k, base in (
            ("events", topics.EVENTS),
            ("compacted", topics.COMPACTED),
            ("wake", topics.WAKE),
            ("dlq", topics.DLQ),
        )
    )
    topics.ensure_topics(admin, specs)
    if secure:
        kafka_secure.grant(secure.client(), kafka_secure.service_acls(secure_names(run_)))
        run_.step(
            f"secured: Kafka {secure.bootstrap} over SASL_SSL, one SCRAM principal per service with ACLs "
            "for this run's topics and groups; Postgres over TLS (sslmode=verify-full)"
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(run_.schema)))
    with psycopg.connect(dsn) as conn:
        apply_migrations(conn, run_.schema)
        conn.commit()
    run_.step(f"topics demo.{run_.run_id}.* and schema {run_.schema} created")

    secret, token, port = secrets.token_hex(16), secrets.token_hex(16), free_port()
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "DATABASE_URL": dsn,
        "SLACK_SIGNING_SECRET": secret,
        "ALERTMANAGER_TOKEN": token,
        "SLACK_BOT_USER_ID": BOT_USER_ID,
        "PYTHONUNBUFFERED": "1",
    }
    seed = seed_incident()
    try:
        common = ["--dlq-topic", names["dlq"]]
        side = slack_side(run_, env, t)
        run_.step(
            f"Slack: {'our stand-in' if side.ours else 'the Slack API'} at {side.api_url}, channel {side.channel}"
        )

        def env_of(service: str, base: dict[str, str] = env) -> dict[str, str]:
            """Secured: the service's own principal (its client properties file) on the SASL_SSL node."""
            return {**base, **secure.env(service)} if secure else base

        slack_env = env_of("slack", {**env, "SLACK_API_URL": side.api_url, "SLACK_BOT_TOKEN": side.bot_token})
        start(
            run_,
            "slack",
            ["--events-topic", names["events"], "--group", f"demo.{run_.run_id}.slack", "--schema", run_.schema,
             "--default-channel", side.channel],
            slack_env,
        )  # fmt: skip
        start(
            run_,
            "ingest",
            ["--port", str(port), "--events-topic", names["events"], "--wake-topic", names["wake"],
             "--schema", run_.schema, *common],
            env_of("ingest"),
        )  # fmt: skip
        start(
            run_,
            "compactor",
            [
                "--app-id", f"demo.{run_.run_id}.compactor",
                "--events-topic", names["events"],
                "--compacted-topic", names["compacted"],
                "--selections-topic", names["selections"],
                "--workers-dir", str(run_.root / "faust"),
                *common,
            ],
            env_of("compactor"),
        )  # fmt: skip
        start(
            run_,
            "projector",
            [
                "--schema",
                run_.schema,
                "--topic",
                names["compacted"],
                "--group",
                f"demo.{run_.run_id}.projector",
                *common,
            ],
            env_of("projector"),
        )
        start(
            run_,
            "agent",
            [
                "--schema", run_.schema,
                "--events-topic", names["events"],
                "--wake-topic", names["wake"],
                "--group", f"demo.{run_.run_id}.agent",
                *common,
            ],
            env_of("agent"),
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for("ingest ready", healthy, t, run_.log("ingest"), run_)
        run_.step(f"ingest ready on {base}")
        wait_for(
            "projector ready", log_has(run_.log("projector"), "assigned"), t, run_.log("projector"), run_
        )
        run_.step("projector ready (partitions assigned)")
        wait_for(
            "compactor ready",
            log_has(run_.log("compactor"), "partitions assigned"),
            t,
            run_.log("compactor"),
            run_,
        )
        run_.step("compactor ready (faust worker)")
        wait_for("agent ready", log_has(run_.log("agent"), "agent starting"), t, run_.log("agent"), run_)
        run_.step("agent ready")
        wait_for(
            "Slack poster ready", log_has(run_.log("slack"), "slack poster ready"), t, run_.log("slack"), run_
        )
        run_.step("Slack poster ready")

        with httpx.Client(base_url=base, timeout=10) as client:
            resp = client.post(
                "/alertmanager", json=seed.alertmanager_webhook, headers={"Authorization": f"Bearer {token}"}
            )
            if resp.status_code != 200:
                raise UserFacingError(
                    f"step 'alertmanager webhook': ingest answered {resp.status_code}: {resp.text[:200]}"
                )
            thread_ts = str(resp.json().get("thread_ts") or seed.thread_ts)
            run_.step(f"alert sent through ingest (incident {thread_ts}); waiting for its Slack thread")
            root = _await(
                recorded(dsn, run_.schema, f"{thread_ts}:-:alert:0"), "alert posted to Slack", t, run_
            )
            channel, root_ts = root
            run_.step(f"the bot posted the alert: Slack thread {channel}/{root_ts}; waiting for round 1")
            wait_for("round 1", round_posted(dsn, run_.schema, thread_ts, 1), t, run_.log("agent"), run_)
            _await(recorded(dsn, run_.schema, f"{thread_ts}:1:post:0"), "round 1 posted to Slack", t, run_)
            run_.step("round 1 committed (investigate, hypothesis, judge, post) and its questions posted")
            for i, human in enumerate(seed.humans):
                kind = "app_mention" if human.mention else "message"
                event = slack_event(kind, root_ts, human.ts, human.user, human.text, channel)
                post_slack(client, secret, slack_envelope(event, f"Ev{run_.run_id.upper()}{i:03d}"))
                label = "mention" if human.mention else "reply"
                run_.step(f"Slack {label} from {human.user} in the alert's thread sent (signed)")
            wait_for("round 2", round_posted(dsn, run_.schema, thread_ts, 2), t, run_.log("agent"), run_)
            _await(recorded(dsn, run_.schema, f"{thread_ts}:2:post:0"), "round 2 posted to Slack", t, run_)
            run_.step("round 2 committed and its summary posted")
        with db(dsn, run_.schema) as conn:
            rows = fetch_rows(conn, thread_ts)
        print()
        print(render_table(rows))
        print()
        raw_total = sum(r.raw_tokens for r in rows)
        ctx_total = sum(r.context_tokens for r in rows)
        print(f"raw total: {raw_total:,} tokens; in context: {ctx_total:,} tokens")
        inputs = model_inputs(run_.log("agent"))
        if inputs.get(2):
            biggest = max(tok for _node, tok in inputs[2])
            calls = ", ".join(f"{node} {tok:,}" for node, tok in inputs[2])
            print(
                f"round-2 model input: {biggest:,} tokens (largest call: messages with the preamble, "
                f"plus the tool schemas on investigate calls; calls: {calls})"
            )
        used = models_used(dsn, run_.schema, thread_ts, run_.log("agent"))
        if used == {LOCAL_MODEL} or (not used and LOCAL_MODEL in run_.log("agent").read_text()):
            print(LOCAL_NOTE)
        else:
            print(f"model: {', '.join(sorted(used)) or 'unknown'}")
        print()
        print(
            f"What the bot posted into the Slack thread {channel}/{root_ts}, in order (conversations.replies):"
        )
        for message in thread_in_slack(side, channel, root_ts):
            tag = ((message.get("metadata") or {}).get("event_payload") or {}).get("event_id", "-")
            first = str(message.get("text") or "").splitlines()[0][:100] if message.get("text") else ""
            print(f"  {message.get('ts')}  [{tag}]  {first}")
        print(
            f"schema {run_.schema}; logs in {run_.root}; `incident-memory show {thread_ts} --schema {run_.schema}`"
        )
    finally:
        stop_all(run_)
        run_.step("services stopped")
    return 0
