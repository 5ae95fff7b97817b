"""Generated incident histories for recall: known root causes, noisy labels, look-alikes, concurrency.

Every incident is made of the events' raw material (log lines with variable ids, numbers and pods;
pod events; series; people's words) and goes through the same pure extraction and profile
(`schemas/incident_profile.py`) as the projector's, so the benchmark measures the real pipeline
from facts on. The seed decides everything: a different seed is a history kept aside.

- A cause has its own error templates, pod reasons, a series shape, a fix and a vocabulary.
- Causes come in look-alike pairs: the same alert name and services and one shared error symptom,
  different other error templates; an incident shows a random subset of its cause's templates, and
  15% of incidents have no logs at all (only reasons, labels and words to go on).
- Labels are noisy: the service is often another of the cause's services, sometimes any; the alert
  name is sometimes another; namespaces and clusters are random.
- An unrelated incident open beside a new one is a third of the time its look-alike (`_unrelated`).
- Every incident also logs common templates (requests, health checks) and generic errors
  ("connection reset by peer") that every cause shares: noise that IDF must see through.
- A cause has a locus: a node that goes bad (events on the Node object), a dependency it fails to reach
  (connection failures in its error lines, failed client spans in its traces), or none (its code). An
  outage's incidents share the bad node; incidents of one cause in history ran on other nodes. Every
  pod-level event names the node its pod ran on (a locus it is not), nodes are few (unrelated incidents
  share one by chance), some incidents see an unrelated node flap, and connection failures to different
  dependencies share one log skeleton (the host's digits are masked), so only the host tells them apart.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schemas.incident_profile import (
    Fact,
    Profile,
    build_profile,
    decisions,
    loki_facts,
    pod_event_facts,
    tempo_facts,
)

ALERTS = ("KubePodOOMKilled", "HighErrorRate", "HighLatency", "KubePodCrashLooping", "TargetDown", "SLOBurn")
REASONS = ("OOMKilling", "BackOff", "Unhealthy", "FailedScheduling", "Evicted", "FailedMount", "NodeNotReady",
           "ImagePullBackOff", "Killing", "FailedCreatePodSandBox")  # fmt: skip
SUBJECTS = ("heap", "cache", "pool", "queue", "lock", "socket", "disk", "certificate", "token", "index", "shard",
            "replica", "buffer", "thread", "session", "schema", "quota", "dns", "lease", "snapshot")  # fmt: skip
FAILURES = ("exhausted", "corrupted", "expired", "timed out", "refused", "overflowed", "deadlocked", "rejected",
            "unreachable", "stale")  # fmt: skip
FIXES = ("rolled back to {v}", "raised the limit to {n}Mi", "restarted the {s} pods", "failed over to the replica",
         "disabled the feature flag {s}-v2", "scaled up to {n} replicas", "drained node ip-10-0-{n}-7",
         "flushed the {s} cache")  # fmt: skip
COMMON = ("GET /api/v1/items/{id} 200 in {n}ms", "health check ok for pod {pod}", "POST /api/v1/orders 201 in {n}ms",
          "cache hit ratio {n}%", "GC pause {n}ms")  # fmt: skip
GENERIC_ERRORS = ("ERROR connection reset by peer host={ip}", "WARN retrying request {id} attempt {n}",
                  "ERROR upstream returned 503 for {id}")  # fmt: skip
WORDS = ("deploy", "users", "checkout", "pager", "latency", "errors", "customers", "dashboard", "graph", "looking",
         "metrics", "logs", "spike", "since", "started", "rollout", "traffic", "region", "alert", "weird")  # fmt: skip
LOCI = ("node", "dependency", "code")
DEPENDENCY_KINDS = ("pg", "redis", "kafka", "grpc", "api")
N_NODES = 12
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cause:
    number: int
    alertname: str
    services: tuple[str, ...]
    errors: tuple[str, ...]
    reasons: tuple[str, ...]
    fix: str
    words: tuple[str, ...]
    locus: str = "code"  # node | dependency | code
    dependency: str | None = None


@dataclass(frozen=True)
class Incident:
    thread_ts: str
    cause: int
    channel: str
    opened_at: datetime
    resolved_at: datetime | None
    profile: Profile


def make_causes(rng: random.Random, n_causes: int, n_services: int) -> list[Cause]:
    causes: list[Cause] = []
    for k in range(0, n_causes, 2):  # look-alike pairs: same alert and services, other patterns
        alertname = rng.choice(ALERTS)
        services = tuple(f"svc-{rng.randrange(n_services):03d}" for _ in range(3))
        symptom = (
            f"ERROR request to {rng.choice(SUBJECTS)} failed: deadline exceeded after {{n}}ms"  # both show it
        )
        for j in range(2):
            number = k + j
            subject, failure = rng.choice(SUBJECTS), rng.choice(FAILURES)
            errors = (
                symptom,
                f"ERROR {subject} {failure} in module m{number} after {{n}}ms id={{id}}",
                f"FATAL c{number} {subject} invariant broken: {rng.choice(FAILURES)} {rng.choice(SUBJECTS)} at {{hex}}",
                f"ERROR worker {{pod}} gave up on {subject} batch {{n}} ({failure})",
            )[: rng.randint(3, 4)]
            fix = rng.choice(FIXES).format(
                v=f"3.{number}.{rng.randrange(9)}", n=rng.randrange(2, 9) * 64, s=subject
            )
            locus = rng.choice(LOCI)
            dependency = (
                f"{rng.choice(DEPENDENCY_KINDS)}-{rng.randrange(n_services):03d}"
                if locus == "dependency"
                else None
            )
            causes.append(Cause(number, alertname, services, errors, tuple(rng.sample(REASONS, 2)), fix,
                                (*tuple(rng.sample(WORDS, 4)), subject, failure.split()[0]),
                                locus, dependency))  # fmt: skip
    return causes


def _fill(rng: random.Random, template: str, service: str) -> str:
    return template.format(
        id=f"{rng.getrandbits(40):x}", n=rng.randrange(1, 5000), ip=f"10.0.{rng.randrange(255)}.{rng.randrange(255)}",
        pod=f"{service}-{rng.getrandbits(28):07x}-{rng.getrandbits(20):05x}"[:40], hex=f"0x{rng.getrandbits(32):08x}",
    )  # fmt: skip


def _loki(rng: random.Random, cause: Cause, service: str) -> dict[str, object]:
    shown = rng.sample(cause.errors, rng.randint(2, len(cause.errors)))  # not every symptom every time
    if cause.dependency is not None:  # one skeleton for every dependency: the host's digits are masked
        shown.append(
            f"ERROR dial tcp {cause.dependency}:{rng.choice((5432, 6379, 9092, 443))}: connect: connection refused"
        )
    lines = [_fill(rng, t, service) for t in shown for _ in range(rng.randint(3, 40))]
    lines += [_fill(rng, t, service) for t in rng.sample(COMMON, 3) for _ in range(rng.randint(5, 60))]
    lines += [_fill(rng, t, service) for t in rng.sample(GENERIC_ERRORS, rng.randint(0, 2)) for _ in range(5)]
    return {
        "data": {
            "result": [
                {"stream": {"app": service}, "values": [[str(i), line] for i, line in enumerate(lines)]}
            ]
        }
    }


def _pod_events(
    rng: random.Random, cause: Cause, service: str, node: str, avoid: str | None
) -> dict[str, object]:
    """Pod-level events name the node their pod ran on (not a locus); a bad node has events of its own, and
    any incident may see some other node flap."""
    pod = f"{service}-{rng.getrandbits(28):07x}-{rng.getrandbits(20):05x}"
    items: list[dict[str, object]] = [
        {"reason": r, "count": rng.randint(1, 9), "type": "Warning", "source": {"host": node},
         "involvedObject": {"kind": "Pod", "name": pod}}
        for r in cause.reasons if rng.random() > 0.15
    ]  # fmt: skip
    if cause.locus == "node" and rng.random() > 0.15:
        items.append({"reason": "NodeNotReady", "count": 1, "involvedObject": {"kind": "Node", "name": node}})
    if rng.random() < 0.08:
        flapping = _node(rng, avoid)
        items.append({"reason": "Rebooted", "count": 1, "involvedObject": {"kind": "Node", "name": flapping}})
    return {"items": items}


def _span(peer: str, *, kind: int, error: bool) -> dict[str, object]:
    return {"kind": kind, "status": {"code": 2 if error else 0},
            "attributes": [{"key": "peer.service", "value": {"stringValue": peer}}]}  # fmt: skip


def _trace(rng: random.Random, cause: Cause, service: str, n_services: int) -> dict[str, object]:
    """Healthy calls to other services; the failing call to the cause's dependency, when it has one; a
    failed server span of its own otherwise (no dependency named)."""
    spans = [_span(f"svc-{rng.randrange(n_services):03d}", kind=3, error=False) for _ in range(3)]
    spans.append(
        _span(cause.dependency, kind=3, error=True)
        if cause.dependency
        else _span(service, kind=2, error=True)
    )
    return {"batches": [{"scopeSpans": [{"spans": spans}]}]}


def _node(rng: random.Random, avoid: str | None = None) -> str:
    """A node of the cluster; `avoid` is another outage's node (a node in trouble within the hour is one
    fact shared by every incident that sees it, so an unrelated incident is placed elsewhere)."""
    while True:
        node = f"ip-10-0-{rng.randrange(N_NODES)}-17.ec2.internal"
        if node != avoid:
            return node


def _human(rng: random.Random, cause: Cause, resolved: bool) -> str:
    words = rng.sample(WORDS, 5) + rng.sample(list(cause.words), 3)
    text = " ".join(words)
    return f"{text}. {cause.fix}" if resolved else text


def make_incident(rng: random.Random, cause: Cause, number: int, opened: datetime, *, n_services: int,
                  channel: str, open_for: timedelta | None = None, resolved: bool = True,
                  noise: float = 0.25, node: str | None = None, avoid: str | None = None) -> Incident:  # fmt: skip
    thread = f"{1_760_000_000 + number * 7:d}.{number:06d}"
    service = rng.choice(cause.services) if rng.random() > noise else f"svc-{rng.randrange(n_services):03d}"
    alertname = cause.alertname if rng.random() > noise else rng.choice(ALERTS)
    at = opened.isoformat()
    labels = {"service": service, "namespace": rng.choice(("shop", "core", "edge")),
              "cluster": rng.choice(("eu-1", "us-1")), "severity": rng.choice(("critical", "warning"))}  # fmt: skip
    events = _pod_events(rng, cause, service, node or _node(rng, avoid), avoid)
    closed = opened + (open_for or timedelta(minutes=rng.randint(20, 180))) if resolved else None
    texts = [_human(rng, cause, resolved and k == 2) for k in range(3)]
    logs = loki_facts(_loki(rng, cause, service)) if rng.random() > 0.15 else {}  # no logs asked: 15%
    traced = tempo_facts(_trace(rng, cause, service, n_services)) if rng.random() < 0.5 else {}
    facts = [
        Fact(
            f"{thread}:-:alert:0", "alert", at, {"alertname": alertname, "labels": labels, "status": "firing"}
        ),
        Fact(f"{thread}:1:tools:0", "tool", at, logs),
        Fact(f"{thread}:1:tools:1", "tool", at, pod_event_facts(events)),
        Fact(f"{thread}:1:tools:2", "tool", at, traced),
        Fact(f"{thread}:-:channel:{channel}.channel", "channel", at, {"channel": channel, "private": False}),
        *(
            Fact(
                f"{thread}:-:human:{k}",
                "human",
                (opened + timedelta(minutes=k + 1)).isoformat(),
                {"text": t, "decisions": decisions(t)},
            )
            for k, t in enumerate(texts)
        ),
    ]
    if closed is not None:
        facts.append(Fact(f"{thread}:-:alert:resolved", "alert", closed.isoformat(),
                          {"alertname": alertname, "labels": labels, "status": "resolved"}))  # fmt: skip
    return Incident(thread, cause.number, channel, opened, closed, build_profile(thread, facts))


def _unrelated(rng: random.Random, causes: list[Cause], cause: Cause) -> Cause:
    """Another cause open beside the query: a third of the time its look-alike (same alert and services, the
    same symptom, other errors), the hardest company to tell apart; otherwise any other cause."""
    if rng.random() < 1 / 3:
        return causes[cause.number ^ 1]
    return rng.choice([c for c in causes if c.number != cause.number])


@dataclass(frozen=True)
class History:
    past: list[Incident]
    queries: list[Incident]  # each opened after every past incident
    concurrent: dict[str, list[str]]  # query -> open incidents of the same cause within the hour
    unrelated_open: dict[str, list[str]]  # query -> open incidents of other causes within the hour


def make_history(seed: int, *, n_past: int = 600, n_queries: int = 100, n_causes: int = 40,
                 n_services: int = 60, channel: str = "C0INC") -> History:  # fmt: skip
    """A history: `n_past` resolved incidents, then `n_queries` new ones, some with concurrent company."""
    rng = random.Random(seed)
    causes = make_causes(rng, n_causes, n_services)
    past = [make_incident(rng, rng.choice(causes), k, T0 + timedelta(hours=6 * k), n_services=n_services,
                          channel=channel) for k in range(n_past)]  # fmt: skip
    queries: list[Incident] = []
    concurrent: dict[str, list[str]] = {}
    unrelated: dict[str, list[str]] = {}
    start = T0 + timedelta(hours=6 * n_past + 48)
    number = n_past
    for q in range(n_queries):
        opened = start + timedelta(days=3 * q)
        cause = rng.choice(causes)
        node = _node(rng)  # where the outage is, when its cause is a node's
        shared = node if cause.locus == "node" else None
        company: list[Incident] = []
        if q % 2 == 0:  # the "payments did the same 20 minutes ago" case
            number += 1
            company.append(make_incident(rng, cause, number, opened - timedelta(minutes=rng.randint(5, 55)),
                                         n_services=n_services, channel=channel,
                                         open_for=timedelta(hours=3), node=shared))  # fmt: skip
        if q % 3 == 0:  # an unrelated incident open at the same time
            number += 1
            other = _unrelated(rng, causes, cause)
            company.append(make_incident(rng, other, number, opened - timedelta(minutes=rng.randint(5, 55)),
                                         n_services=n_services, channel=channel,
                                         open_for=timedelta(hours=3), avoid=node))  # fmt: skip
        number += 1
        query = make_incident(
            rng, cause, number, opened, n_services=n_services, channel=channel, resolved=False, node=node
        )
        queries.append(query)
        concurrent[query.thread_ts] = [c.thread_ts for c in company if c.cause == cause.number]
        unrelated[query.thread_ts] = [c.thread_ts for c in company if c.cause != cause.number]
        past.extend(company)
    return History(past, queries, concurrent, unrelated)
