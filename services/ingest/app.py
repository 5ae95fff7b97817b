"""The ingest HTTP service: Slack Events API, Alertmanager webhooks, health and metrics (Starlette).

Every request is answered only after the broker acked all of its events (200), or with 503
when it did not within `ack_timeout_s` (Slack and Alertmanager both retry a 5xx, and the
deterministic ids make the retry harmless). Bad input gets a 4xx with a JSON reason and
produces nothing.

A Slack Events API payload has one way through, `Ingest.accept_slack` (map, dedupe by event_id,
produce), whether it came over HTTP (`/slack/events`, signed) or over Socket Mode
(`socket_mode.py`, authenticated by the websocket): both give the same events and share one dedupe.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from services.ingest import slack_signature
from services.ingest.alerts import Window, map_webhook
from services.ingest.config import IngestConfig
from services.ingest.dedupe import TtlSet
from services.ingest.directory import GroupDirectory, LookupNeeded, ThreadDirectory
from services.ingest.emitter import Emitter, Record
from services.ingest.metrics import Metrics, closed, reason_label
from services.ingest.origin import FOREIGN, ORIGIN_FIELDS, check_origin
from services.ingest.planned import Planned, parse_json_object
from services.ingest.producer import AckedProducer, ProduceError
from services.ingest.rejections import Ignored, Rejected
from services.ingest.slack_events import Callback, Challenge, map_payload
from services.runtime.logs import about

log = logging.getLogger("incident_memory.ingest")

# A background loop run beside the server (the alerts-topic consumer): called with a stop event.
Worker = Callable[[threading.Event], None]

OutcomeKind = Literal["produced", "duplicate", "ignored", "rejected", "challenge", "unavailable"]


@dataclass(frozen=True)
class SlackOutcome:
    """What became of one Slack Events API payload, and how HTTP answers it (`status`, `body`).

    Everything but `unavailable` is settled: Slack must not send it again (HTTP: 2xx or 4xx;
    Socket Mode: ack). `unavailable` (the broker did not ack) is answered 503 / left unacked,
    so Slack retries it."""

    kind: OutcomeKind
    status: int
    body: dict[str, Any]

    @property
    def settled(self) -> bool:
        return self.kind != "unavailable"


class Companion(Protocol):
    """An async way in that lives on the server's loop (Socket Mode): started once the producer
    runs, stopped before it is flushed."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Ingest:
    """The handlers and their state: the producer, the retry dedupe, the metrics."""

    def __init__(self, config: IngestConfig, producer: AckedProducer, metrics: Metrics) -> None:
        self.config = config
        self.producer = producer
        self.metrics = metrics
        self.emitter = Emitter(config, producer, metrics)
        self.window = Window(config.window_before_s, config.window_after_s)
        self.seen = TtlSet(config.dedupe_ttl_s, config.dedupe_max_entries)
        self.inflight: dict[str, asyncio.Future[None]] = {}
        self.directory = ThreadDirectory(config.directory_dsn, config.directory_schema)
        self.groups = GroupDirectory(config.directory_dsn, config.directory_schema, config.group_memory_s)

    def warm_up(self) -> dict[str, float]:
        """Pay the first-use costs before serving, so the first request does not: the producer's
        metadata for the topics it writes, the read model's connection, a mapping and an encoding.
        Seconds per step; a step whose counterpart is away costs its timeout and is paid later."""
        spent: dict[str, float] = {}
        started = time.perf_counter()
        self.producer.warm([self.config.events_topic, self.config.wake_topic])
        spent["kafka_metadata_s"] = time.perf_counter() - started
        started = time.perf_counter()
        self.groups.known("incident-memory-warm-up")
        spent["read_model_s"] = time.perf_counter() - started
        started = time.perf_counter()
        message = {"type": "message", "channel": "C0WARMUP", "user": "U0WARMUP", "text": "warm-up",
                   "ts": "1700000000.000002", "thread_ts": "1700000000.000001"}  # fmt: skip
        payload = {"type": "event_callback", "event_id": "EvWARMUP", "team_id": "T0", "event": message}
        try:
            result = map_payload(payload, self.config.bot_user_id)
            if isinstance(result, Callback):
                self.emitter.encode(result.planned)
        except (Rejected, Ignored, ValidationError) as exc:  # a warm-up never stops a start
            log.warning("warm-up mapping failed", extra=about(None, None, error=repr(exc)[:200]))
        spent["mapping_s"] = time.perf_counter() - started
        return spent

    # --- endpoints ----------------------------------------------------------------------

    async def slack_events(self, request: Request) -> Response:
        """Slack's Events API over HTTP: the signature and body checks, then `accept_slack`."""
        try:
            body = await self._read_body(request)
            timestamp = request.headers.get("x-slack-request-timestamp")
            signature = request.headers.get("x-slack-signature")
            reason = slack_signature.verify(
                self.config.signing_secret,
                timestamp,
                signature,
                body,
                time.time(),
                self.config.timestamp_tolerance_s,
            )
            if reason is not None:
                raise Rejected(401, reason)
            payload = parse_json_object(body)
        except Rejected as rejected:
            return self._reject("slack", rejected)
        outcome = await self.accept_slack(payload, "slack", retry=request.headers.get("x-slack-retry-num"))
        return self._answer("slack", outcome.status, outcome.body)

    async def accept_slack(
        self, payload: dict[str, Any], endpoint: str = "slack", retry: str | None = None
    ) -> SlackOutcome:
        """One authenticated Events API payload (HTTP body or Socket Mode envelope payload): map it,
        drop it if its event_id was already acked (a retry), else produce its events and wait for
        the broker's ack. Counts rejections and ignores under `endpoint`; never raises for input."""
        try:
            check_origin(payload, self.config.team_id, self.config.app_id)
            result = await self._map_slack(payload)
            records = self.emitter.encode(result.planned) if isinstance(result, Callback) else []
        except ValidationError as exc:
            return self._rejected(endpoint, Rejected(400, "invalid_event", _first_error(exc)))
        except Rejected as rejected:
            return self._rejected(endpoint, rejected)
        except Ignored as ignored:
            self._count_ignored(ignored, endpoint)
            return SlackOutcome("ignored", 200, {"ok": True, "ignored": ignored.reason})
        except (ValueError, OverflowError, RecursionError) as exc:  # input no mapping rule foresaw
            return self._rejected(endpoint, _unmappable(exc))
        if isinstance(result, Challenge):
            return SlackOutcome("challenge", 200, {"challenge": result.value})
        if retry:
            log.info(
                "slack retry",
                extra=about(None, None, event_id=result.event_id, retry=retry, endpoint=endpoint),
            )
        return await self._once(result.event_id, result.planned, records, endpoint)

    async def _map_slack(self, payload: dict[str, Any]) -> Callback | Challenge:
        """`map_payload` on the event loop while the thread directory answers from memory; in the
        thread pool when it must ask the database (a reply in a thread it has not seen lately), so
        that query never holds up the requests around it."""
        try:
            return map_payload(payload, self.config.bot_user_id, self.directory.remembered)
        except LookupNeeded:
            return await run_in_threadpool(
                map_payload, payload, self.config.bot_user_id, self.directory.resolve
            )

    async def alertmanager(self, request: Request) -> Response:
        try:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode("utf-8", errors="replace"), self.config.alertmanager_token.encode()
            ):
                raise Rejected(401, "bad_token", "expected Authorization: Bearer <ALERTMANAGER_TOKEN>")
            body = await self._read_body(request)
            group = await run_in_threadpool(
                map_webhook, parse_json_object(body), self.window, self.groups.known
            )
            records = self.emitter.encode(group.planned)
        except ValidationError as exc:
            return self._reject("alertmanager", Rejected(400, "invalid_event", _first_error(exc)))
        except Rejected as rejected:
            return self._reject("alertmanager", rejected)
        except (ValueError, OverflowError, RecursionError) as exc:  # input no mapping rule foresaw
            return self._reject("alertmanager", _unmappable(exc))
        failure = await self._deliver(group.planned, records, "alertmanager")
        if failure is not None:
            return self._answer("alertmanager", 503, _unavailable(failure))
        self.groups.decided(group)
        return self._answer(
            "alertmanager",
            200,
            {
                "ok": True,
                "thread_ts": group.thread_ts,
                "status": group.status,
                "produced": len(group.planned),
            },
        )

    async def healthz(self, request: Request) -> Response:
        error = await run_in_threadpool(self.producer.broker_reachable)
        if error is not None:
            return self._answer("healthz", 503, {"ok": False, "error": "broker_unreachable", "detail": error})
        return self._answer("healthz", 200, {"ok": True})

    async def metrics_endpoint(self, request: Request) -> Response:
        error = await run_in_threadpool(self.producer.broker_reachable)
        self.metrics.healthy.set(float(error is None))
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # --- helpers ------------------------------------------------------------------------

    async def _once(
        self, event_id: str, planned: list[Planned], records: list[Record], endpoint: str
    ) -> SlackOutcome:
        """Produce a Slack event's events unless that event id was already acked (a retry)."""
        pending = self.inflight.get(event_id)
        if pending is not None:  # the same event is being produced right now: wait for its outcome
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(pending), self.config.ack_timeout_s)
        if event_id in self.seen:
            self.metrics.duplicates.inc()
            return SlackOutcome("duplicate", 200, {"ok": True, "duplicate": True, "event_id": event_id})
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.inflight[event_id] = mine
        try:
            failure = await self._deliver(planned, records, endpoint)
            if failure is None:
                self.seen.add(event_id)
        finally:
            self.inflight.pop(event_id, None)
            mine.set_result(None)
        if failure is not None:
            return SlackOutcome("unavailable", 503, _unavailable(failure))
        return SlackOutcome("produced", 200, {"ok": True, "event_id": event_id, "produced": len(planned)})

    async def _deliver(self, planned: list[Planned], records: list[Record], endpoint: str) -> str | None:
        """None once the broker acked every event; otherwise why not (the caller answers 503)."""
        started = time.perf_counter()
        try:
            futures = self.emitter.submit(records)
            waits = [asyncio.wrap_future(f) for f in futures]
            await asyncio.wait_for(asyncio.gather(*waits), self.config.ack_timeout_s)
        except (ProduceError, TimeoutError) as exc:
            reason = "ack_timeout" if isinstance(exc, TimeoutError) else "produce_failed"
            self.metrics.produce_failures.labels(reason).inc()
            first = planned[0].event if planned else None
            log.warning(
                "broker did not ack; answering 503 (Socket Mode: leaving it unacked)",
                extra=about(
                    first.thread_ts if first else None,
                    first.message_id if first else None,
                    reason=reason,
                    detail=str(exc),
                    endpoint=endpoint,
                ),
            )
            return f"{reason}: {exc}"
        self.emitter.acked(planned, started, endpoint)
        return None

    async def _read_body(self, request: Request) -> bytes:
        """The raw body, refusing (413) as soon as it passes the limit, never buffering more."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                raise Rejected(400, "bad_content_length", declared[:40])
            if int(declared) > limit:
                raise Rejected(413, "body_too_large", f"{declared} bytes > limit {limit}")
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise Rejected(413, "body_too_large", f"more than {limit} bytes")
                chunks.append(chunk)
        except ClientDisconnect:
            raise Rejected(400, "client_disconnected") from None
        return b"".join(chunks)

    def _count_ignored(self, ignored: Ignored, endpoint: str) -> None:
        self.metrics.ignored.labels(reason_label(ignored.reason)).inc()
        if ignored.reason.startswith(FOREIGN):
            self.metrics.foreign.labels(closed(ignored.reason.removeprefix(FOREIGN), ORIGIN_FIELDS)).inc()
            log.info(
                "foreign slack event dropped",
                extra=about(None, None, endpoint=endpoint, reason=ignored.reason),
            )

    def _reject(self, endpoint: str, rejected: Rejected) -> Response:
        outcome = self._rejected(endpoint, rejected)
        return self._answer(endpoint, outcome.status, outcome.body)

    def _rejected(self, endpoint: str, rejected: Rejected) -> SlackOutcome:
        """Count and log a rejection; its outcome carries the 4xx and the JSON reason."""
        self.metrics.rejections.labels(endpoint, reason_label(rejected.reason)).inc()
        log.info(
            "rejected",
            extra=about(None, None, endpoint=endpoint, reason=rejected.reason, detail=rejected.detail),
        )
        body: dict[str, Any] = {"ok": False, "error": rejected.reason}
        if rejected.detail:
            body["detail"] = rejected.detail[:300]
        return SlackOutcome("rejected", rejected.status, body)

    def _answer(self, endpoint: str, status: int, body: dict[str, Any]) -> Response:
        self.metrics.requests.labels(endpoint, str(status)).inc()
        return JSONResponse(body, status_code=status)


def _unavailable(failure: str) -> dict[str, Any]:
    return {"ok": False, "error": "broker_unavailable", "detail": failure[:300]}


def _unmappable(exc: BaseException) -> Rejected:
    """Input that broke a mapping rule we did not foresee: a 400 with its reason, never a 500."""
    log.warning("input no rule foresaw", extra=about(None, None, error=f"{type(exc).__name__}: {exc}"[:300]))
    return Rejected(400, "invalid_input", f"{type(exc).__name__}: {exc}"[:300])


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid"
    first = errors[0]
    return f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg', '')}"[:300]


def build_app(
    ingest: Ingest, workers: list[Worker] | None = None, companions: list[Companion] | None = None
) -> Starlette:
    """The ASGI app. Its lifespan starts the producer's poll thread, any worker beside it and any
    companion (Socket Mode); on shutdown it stops the companions (they finish what is in flight),
    then the workers, then flushes the producer.

    `/slack/events` is served only with a signing secret: without one (Socket Mode alone) nothing
    could tell Slack's requests from anyone's."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        stop = threading.Event()
        ingest.producer.start()
        spent = await run_in_threadpool(ingest.warm_up)
        log.info("warmed up", extra=about(None, None, **{k: round(v, 4) for k, v in spent.items()}))
        threads = [
            threading.Thread(target=w, args=(stop,), name="ingest-worker", daemon=True) for w in workers or []
        ]
        for thread in threads:
            thread.start()
        started: list[Companion] = []
        try:
            for companion in companions or []:
                await companion.start()
                started.append(companion)
            yield
        finally:
            for companion in reversed(started):
                await companion.stop()
            stop.set()
            for thread in threads:
                await run_in_threadpool(thread.join, 30)
            left = await run_in_threadpool(ingest.producer.close, ingest.config.flush_timeout_s)
            if left:
                log.error("shutdown with undelivered events", extra=about(None, None, undelivered=left))

    routes = [
        Route("/alertmanager", ingest.alertmanager, methods=["POST"]),
        Route("/healthz", ingest.healthz, methods=["GET"]),
        Route("/metrics", ingest.metrics_endpoint, methods=["GET"]),
    ]
    if ingest.config.signing_secret:
        routes.insert(0, Route("/slack/events", ingest.slack_events, methods=["POST"]))
    return Starlette(routes=routes, lifespan=lifespan)
