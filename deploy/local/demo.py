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

from deploy.local import loopback_http
from deploy.local.pipeline import Names, Pipeline, PipelineError, free_port
from services.runtime.errors import UserFacingError

BOT_USER_ID = "U0BOTMEM1"
CHANNEL = "C0INCIDENT"
TEAM_ID, APP_ID = "T0DEMO", "A0DEMO"  # the demo's Slack workspace and app: ingest records only these
LOCAL_MODEL = "local-deterministic"
LOCAL_NOTE = (
    "model: local-deterministic (a deterministic local stand-in behind the LangChain interface, NOT a real LLM; "
    "run `demo --model NAME` (or AGENT_MODEL=NAME, `make demo MODEL=NAME`) with OPENAI_BASE_URL/OPENAI_API_KEY "
    "to use a real one)"
)
STANDIN_WIRE_MODEL = "standin-deterministic"  # deploy/local/openai_standin.py: the wire, not a model
NOT_A_MODEL = ("local", LOCAL_MODEL)


@dataclass
class Run:
    """One demo run: its id, its log folder and its clock (its processes are its pipeline's)."""

    run_id: str
    root: Path
    started: float = field(default_factory=time.monotonic)

    def step(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)


def wait_for(what: str, check: Callable[[], Any], timeout: float, pipe: Pipeline) -> Any:
    """Poll `check` until it answers; a timeout or a crashed service is a one-line error naming the step and
    the log to read."""
    try:
        return pipe.wait_until(check, timeout, what)
    except PipelineError as exc:
        raise UserFacingError(f"step '{what}': {exc.summary}") from None


def sign(secret: str, body: bytes, timestamp: int) -> str:
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def slack_envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """Slack's documented `event_callback` outer shape."""
    return {
        "token": "demo-verification-token",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(float(event["ts"])),
        "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
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


def slack_side(pipe: Pipeline, timeout: float) -> SlackSide:
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
    side = SlackSide(f"http://127.0.0.1:{port}/api/", token, CHANNEL, ours=True)
    pipe.start("slack-standin", argv, ready=lambda: _auth_ok(side))
    wait_for("Slack stand-in ready", lambda: _auth_ok(side), timeout, pipe)
    return side


def _auth_ok(side: SlackSide) -> bool:
    try:
        answer = loopback_http.post(
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


def secure_names(names: Names) -> Any:
    """This run's topics and groups, for the ACLs of the secured node's service principals."""
    from deploy.local import kafka_secure

    t = names.topics
    return kafka_secure.Names(
        events=t["events"],
        compacted=t["compacted"],
        wake=t["wake"],
        dlq=t["dlq"],
        selections=names.selections,
        groups={service: names.group(service) for service in kafka_secure.SERVICES},
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step (default 120)")
    parser.add_argument("--keep-schema", action="store_true", help="accepted for clarity; schemas are kept")
    parser.add_argument("--cache-dir", default=".cache/demo")
    parser.add_argument(
        "--model",
        default=os.environ.get("AGENT_MODEL") or "local",
        help="agent model: an OpenAI-compatible model name at OPENAI_BASE_URL, or 'local' (the labelled "
        "deterministic stand-in; default, or AGENT_MODEL)",
    )
    parser.add_argument(
        "--judge-model",
        default=os.environ.get("JUDGE_MODEL"),
        help="judge model (default: JUDGE_MODEL, else the agent's)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="run over the secured stack (`up --secure`): Kafka over SASL_SSL with each service as its own "
        "SCRAM principal under ACLs, Postgres over TLS with sslmode=verify-full",
    )
    parser.add_argument(
        "--review",
        action="store_true",
        help="then serve the review page on the demo's schema (read-only login) until Ctrl-C (`make review`)",
    )
    parser.add_argument("--review-port", type=int, default=8090)


def model_plan(agent: str, judge: str | None, env: dict[str, str]) -> tuple[str, str, str]:
    """(agent model, judge model, a line saying plainly what will run); an unusable choice is an error."""
    judge = judge or agent
    real = [m for m in (agent, judge) if m not in NOT_A_MODEL]
    if not real:
        return (
            agent,
            judge,
            "models: the deterministic local stand-in (NOT a real LLM) for the agent and the judge",
        )
    if not env.get("OPENAI_API_KEY"):
        raise UserFacingError(
            f"demo --model {real[0]}: set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint)"
        )
    where = env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    line = f"models: agent {agent}, judge {judge}, over the OpenAI wire at {where}"
    if STANDIN_WIRE_MODEL in real:
        line += f" ({STANDIN_WIRE_MODEL} is the project's OpenAI stand-in: deterministic, NOT a real model)"
    return agent, judge, line


def models_line(used: set[str]) -> str:
    """Which models wrote the thread's rows; a playbook's turn and an ungraded verdict are no model's."""
    models = sorted(m for m in used if not m.startswith(("playbook:", "none")))
    if models == [LOCAL_MODEL]:
        return LOCAL_NOTE
    line = f"model: {', '.join(models) or 'unknown'}"
    if STANDIN_WIRE_MODEL in models:
        line += f" ({STANDIN_WIRE_MODEL}: the project's OpenAI stand-in over the wire, NOT a real model)"
    elif LOCAL_MODEL in models:
        line += f" ({LOCAL_MODEL}: the deterministic local stand-in, NOT a real model)"
    return line


def run(args: argparse.Namespace) -> int:
    from deploy.local import kafka_secure
    from deploy.local.seed import seed_incident
    from deploy.local.seed.concurrent import recording_with_payments
    from deploy.local.stack import up
    from services.projector.show import fetch_rows, render_table
    from services.runtime.kafka import admin_config

    agent_model, judge_model, models_said = model_plan(args.model, args.judge_model, dict(os.environ))
    run_id = uuid.uuid4().hex[:8]
    names = Names.fresh(f"demo.{run_id}", f"demo_{run_id}")
    run_ = Run(run_id, Path(args.cache_dir) / run_id)
    run_.root.mkdir(parents=True, exist_ok=True)
    t = args.timeout
    run_.step(f"run {run_id}: starting the stack (Kafka, PostgreSQL)")
    info = up(secure=args.secure)
    bootstrap = getattr(info, "kafka_bootstrap_servers", None) or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    dsn = getattr(info, "database_url", None) or os.environ.get("DATABASE_URL")
    if not bootstrap or not dsn:
        from services.runtime.settings import Settings

        s = Settings.from_env()
        bootstrap, dsn = bootstrap or s.kafka_bootstrap_servers, dsn or s.database_url
    secure = info.secure_kafka if args.secure else None
    if args.secure and secure is None:
        raise UserFacingError(
            "--secure runs on the local stack's secured Kafka node: unset KAFKA_BOOTSTRAP_SERVERS"
        )
    admin: str | dict[str, Any] = admin_config(secure.client()) if secure else bootstrap
    dsn = (info.verify_full_dsn or dsn) if secure else dsn
    secret, token = secrets.token_hex(16), secrets.token_hex(16)
    pipe = Pipeline(
        bootstrap,
        dsn,
        names.schema,
        names.topics,
        run_.root,
        prefix=names.prefix,
        extra_env={
            "SLACK_SIGNING_SECRET": secret,
            "ALERTMANAGER_TOKEN": token,
            "SLACK_BOT_USER_ID": BOT_USER_ID,
            "SLACK_TEAM_ID": TEAM_ID,
            "SLACK_APP_ID": APP_ID,
        },
        # secured: each service as its own principal (its client properties file) on the SASL_SSL node
        service_env=secure.env if secure else None,
    )
    pipe.provision(admin)
    if secure:
        kafka_secure.grant(secure.client(), kafka_secure.service_acls(secure_names(names)))
        run_.step(
            f"secured: Kafka {secure.bootstrap} over SASL_SSL, one SCRAM principal per service with ACLs "
            "for this run's topics and groups; Postgres over TLS (sslmode=verify-full)"
        )
    run_.step(f"topics {names.prefix}.* and schema {names.schema} created")
    run_.step(models_said)

    seed = seed_incident()
    recording = run_.root / "recording.json"  # the seed's telemetry plus the concurrent payments incident's
    recording.write_text(json.dumps(recording_with_payments(seed)))
    pipe.extra_env["TELEMETRY_MCP_RECORDING"] = str(recording)
    try:
        side = slack_side(pipe, t)
        run_.step(
            f"Slack: {'our stand-in' if side.ours else 'the Slack API'} at {side.api_url}, channel {side.channel}"
        )
        slack = pipe.slack(side.api_url, side.bot_token, default_channel=side.channel)
        agent_models = ["--model", agent_model, "--judge-model", judge_model]
        ingest, compactor, projector = pipe.ingest(), pipe.compactor(), pipe.projector()
        agent = pipe.agent(extra=agent_models)
        base = f"http://127.0.0.1:{ingest.port}"
        for proc in (ingest, projector, compactor, agent, slack):
            wait_for(f"{proc.name} ready", proc.ready or (lambda: True), t, pipe)
            run_.step(f"{proc.name} ready" + (f" on {base}" if proc is ingest else ""))

        with httpx.Client(base_url=base, timeout=10) as client:
            concurrent_alert(client, token, seed, dsn, names.schema, t, pipe, run_)
            resp = client.post(
                "/alertmanager", json=seed.alertmanager_webhook, headers={"Authorization": f"Bearer {token}"}
            )
            if resp.status_code != 200:
                raise UserFacingError(
                    f"step 'alertmanager webhook': ingest answered {resp.status_code}: {resp.text[:200]}"
                )
            thread_ts = str(resp.json().get("thread_ts") or seed.thread_ts)
            run_.step(f"alert sent through ingest (incident {thread_ts}); waiting for its Slack thread")
            root = wait_for(
                "alert posted to Slack", recorded(dsn, names.schema, f"{thread_ts}:-:alert:0"), t, pipe
            )
            channel, root_ts = root
            run_.step(f"the bot posted the alert: Slack thread {channel}/{root_ts}; waiting for round 1")
            wait_for("round 1", round_posted(dsn, names.schema, thread_ts, 1), t, pipe)
            wait_for("round 1 posted to Slack", recorded(dsn, names.schema, f"{thread_ts}:1:post:0"), t, pipe)
            run_.step("round 1 committed (investigate, hypothesis, judge, post) and its questions posted")
            for i, human in enumerate(seed.humans):
                kind = "app_mention" if human.mention else "message"
                event = slack_event(kind, root_ts, human.ts, human.user, human.text, channel)
                post_slack(client, secret, slack_envelope(event, f"Ev{run_id.upper()}{i:03d}"))
                label = "mention" if human.mention else "reply"
                run_.step(f"Slack {label} from {human.user} in the alert's thread sent (signed)")
            wait_for("round 2", round_posted(dsn, names.schema, thread_ts, 2), t, pipe)
            wait_for("round 2 posted to Slack", recorded(dsn, names.schema, f"{thread_ts}:2:post:0"), t, pipe)
            run_.step("round 2 committed and its summary posted")
        with db(dsn, names.schema) as conn:
            rows = fetch_rows(conn, thread_ts)
        print()
        print(render_table(rows))
        print()
        raw_total = sum(r.raw_tokens for r in rows)
        ctx_total = sum(r.context_tokens for r in rows)
        print(f"raw total: {raw_total:,} tokens; in context: {ctx_total:,} tokens")
        inputs = model_inputs(agent.log)
        if inputs.get(2):
            biggest = max(tok for _node, tok in inputs[2])
            calls = ", ".join(f"{node} {tok:,}" for node, tok in inputs[2])
            print(
                f"round-2 model input: {biggest:,} tokens (largest call: messages with the preamble, "
                f"plus the tool schemas on investigate calls; calls: {calls})"
            )
        with db(dsn, names.schema) as conn:
            print(recall_line(conn, thread_ts))
        used = models_used(dsn, names.schema, thread_ts, agent.log)
        print(models_line(used))
        playbooks = sorted(m.removeprefix("playbook:") for m in used if m.startswith("playbook:"))
        if playbooks:
            print(f"playbook: {', '.join(playbooks)} made round 1's first tool calls, before any model call")
        print()
        print(
            f"What the bot posted into the Slack thread {channel}/{root_ts}, in order (conversations.replies):"
        )
        for message in thread_in_slack(side, channel, root_ts):
            tag = ((message.get("metadata") or {}).get("event_payload") or {}).get("event_id", "-")
            first = str(message.get("text") or "").splitlines()[0][:100] if message.get("text") else ""
            print(f"  {message.get('ts')}  [{tag}]  {first}")
            for line in concurrent_lines(message):
                print(f"      {line}")
        print(
            f"schema {names.schema}; logs in {run_.root}; `incident-memory show {thread_ts} --schema {names.schema}`"
        )
    finally:
        pipe.stop_all()
        run_.step("services stopped")
    url = f"http://127.0.0.1:{args.review_port}/threads/{thread_ts}"
    if args.review:
        return serve_review(dsn, names.schema, args.review_port, url)
    print(f"review: `incident-memory review --schema {names.schema}`, then open {url}")
    return 0


def concurrent_lines(message: dict[str, Any]) -> list[str]:
    """The concurrent-incident section of a posted message as Slack holds it (the link and the reasons the
    poster rendered), so the demo shows what reached the thread, not what was recorded."""
    for block in message.get("blocks") or []:
        text = str(((block or {}).get("text") or {}).get("text") or "")
        if text.startswith("*Concurrent incident"):
            return text.splitlines()
    return []


def concurrent_alert(
    client: httpx.Client, token: str, seed: Any, dsn: str, schema: str, t: float, pipe: Pipeline, run_: Run
) -> str:
    """The payments alert, opened 20 minutes before checkout's, through ingest; its round 1 done, so its
    profile holds its patterns when checkout's alert recalls (issue 37)."""
    from deploy.local.seed.concurrent import payments_webhook

    resp = client.post(
        "/alertmanager", json=payments_webhook(seed), headers={"Authorization": f"Bearer {token}"}
    )
    if resp.status_code != 200:
        raise UserFacingError(
            f"step 'payments webhook': ingest answered {resp.status_code}: {resp.text[:200]}"
        )
    thread = str(resp.json()["thread_ts"])
    run_.step(
        f"payments alert sent (incident {thread}, opened 20 minutes before checkout's); waiting for round 1"
    )
    wait_for("payments round 1", round_posted(dsn, schema, thread, 1), t, pipe)
    wait_for("payments round 1 posted", recorded(dsn, schema, f"{thread}:1:post:0"), t, pipe)
    run_.step("payments round 1 committed and posted")
    return thread


def recall_line(conn: psycopg.Connection, thread_ts: str) -> str:
    """What recall recorded when checkout's alert opened: the concurrent incidents, with link and reasons."""
    row = conn.execute(
        "SELECT content FROM agent_messages WHERE id = %s", (f"{thread_ts}:-:recall:0",)
    ).fetchone()
    hits = [h for h in (row[0].get("recall") if row else None) or [] if h.get("kind") == "concurrent"]
    if not hits:
        return "recall: no concurrent incident recorded"
    return "\n".join(
        f"recall: concurrent {h['thread']} {h.get('link') or ''} ({'; '.join(h['reasons'])}), linked in the first post"
        for h in hits
    )


def serve_review(owner_dsn: str, schema: str, port: int, url: str) -> int:
    """The review page over the demo's schema, as the local read-only login, until Ctrl-C."""
    import uvicorn

    from deploy.local.review_login import ensure_review_login
    from services.review.db import Reader
    from services.review.web import build_app

    reader = Reader(ensure_review_login(owner_dsn), schema)
    print(f"review: {url} (read-only; Ctrl-C to stop)", flush=True)
    try:
        uvicorn.run(build_app(reader), host="127.0.0.1", port=port, log_level="warning")
    finally:
        reader.close()
    return 0
