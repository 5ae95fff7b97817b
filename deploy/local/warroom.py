"""War-room threads: hundreds of messages from many people, pastes, long alerts, known facts at known places.

Dev tooling (like the seed): tests and benchmarks import it, production never does. Everything is drawn
from `random.Random(seed)`, so a seed names one war room exactly; other seeds give other people, other
facts, other places. A known fact is a sentence a human states once (a number, a version, a time, a
decision); the generator returns where it put each one, so a test can ask whether the model could see
it or find it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.events import AlertReceived, HumanMessage, Wake
from schemas.ids import message_id

BOT = "<@U0BOTMEM1>"
_CHATTER = [
    "anyone else seeing this on their side?",
    "I'm looking at the dashboards now, give me a minute",
    "joining the bridge",
    "+1, same here from the EU region",
    "can we get someone from the platform team in here?",
    "I don't think that's it, the numbers didn't move when we tried that last week",
    "checking the runbook, it says to look at the connection pool first",
    "not sure, the graphs are noisy, could be anything at this point",
    "status page updated, customers are noticing",
    "ok, I'll keep watching the error budget burn",
    "who owns the upstream dependency these days?",
    "let's not change two things at once",
]
_SERVICES = ["checkout-api", "payments-gw", "cart-svc", "inventory-api", "search-edge", "auth-proxy"]


@dataclass(frozen=True)
class Fact:
    """A fact one human stated once: `needle` is the exact text that proves it was seen."""

    message_id: str
    needle: str
    kind: str  # decision | number | version | time


@dataclass
class WarRoom:
    thread_ts: str
    service: str
    events: list[AlertReceived | HumanMessage] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    trigger: HumanMessage | None = None

    def wake(self) -> Wake:
        assert self.trigger is not None
        return Wake(
            thread_ts=self.thread_ts,
            message_id=message_id(self.thread_ts, None, "wake", self.trigger.ts),
            event_time=self.trigger.event_time,
            reason="mention",
            trigger_message_id=self.trigger.message_id,
            user=self.trigger.user,
        )


def _alert(
    rng: random.Random, thread_ts: str, service: str, start: datetime, alerts: int, desc_bytes: int
) -> AlertReceived:
    pods = [f"{service}-{rng.randrange(16**6):06x}-{rng.randrange(36**5):05d}" for _ in range(alerts)]
    group = [
        {
            "status": "firing",
            "labels": {
                "alertname": "HighErrorRate",
                "service": service,
                "pod": pod,
                "node": f"ip-10-0-{k % 7}-{k % 5}",
            },
            "annotations": {},
            "startsAt": (start + timedelta(seconds=k)).isoformat(),
            "fingerprint": f"{k:016x}",
        }
        for k, pod in enumerate(pods)
    ]
    description = "".join(
        f"{service} 5xx ratio {rng.randint(5, 60)}.{rng.randint(0, 9)}% on {rng.choice(pods)} at step {k}\n"
        for k in range(desc_bytes // 60 + 1)
    )[:desc_bytes]
    hook = {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="HighErrorRate",service="{service}"}}',
        "status": "firing",
        "receiver": "pager",
        "commonLabels": {"alertname": "HighErrorRate", "service": service, "severity": "critical"},
        "commonAnnotations": {"summary": f"{service} is returning 5xx", "description": description},
        "alerts": group,
    }
    return AlertReceived(
        thread_ts=thread_ts,
        message_id=message_id(thread_ts, None, "alert", 0),
        event_time=start,
        status="firing",
        service=service,
        alertname="HighErrorRate",
        fingerprint=f"{0:016x}",
        window_start=start - timedelta(minutes=30),
        window_end=start + timedelta(minutes=30),
        alert=hook,
    )


def _facts(rng: random.Random, service: str, n: int) -> list[tuple[str, str, str]]:
    """(sentence, needle, kind): decisions, numbers, versions and times, worded several ways."""
    out = []
    for k in range(n):
        kind = ("decision", "number", "version", "time")[k % 4]
        if kind == "decision":
            ver = f"v{rng.randint(2, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}"
            verb = rng.choice(["rolled back", "scaled", "paged", "restarted"])
            target = {
                "rolled back": f"{service} to {ver}",
                "scaled": f"{service} to {rng.randint(12, 64)} replicas",
                "paged": f"the {rng.choice(['db', 'network', 'storage'])} on-call",
                "restarted": f"the {rng.choice(_SERVICES)} pods",
            }[verb]
            needle = f"{verb} {target}"
            out.append((f"FYI I {needle} a minute ago", needle, kind))
        elif kind == "number":
            needle = f"{rng.randint(1000, 99999)} failed orders"
            out.append((f"finance says we are at {needle} so far", needle, kind))
        elif kind == "version":
            needle = f"{rng.choice(_SERVICES)} {rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}"
            out.append((f"the last deploy before this was {needle}, if that matters", needle, kind))
        else:
            needle = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} UTC"
            out.append((f"the first customer ticket came in at {needle}", needle, kind))
    return out


def _paste(rng: random.Random, service: str, lines: int, at: datetime) -> str:
    body = "\n".join(
        f"{(at + timedelta(milliseconds=37 * k)).isoformat()} level={'error' if k % 9 == 0 else 'info'} "
        f'service={service} msg="upstream timeout" latency_ms={rng.randint(50, 5000)} req={rng.randrange(16**8):08x}'
        for k in range(lines)
    )
    return f"here's what I see in the logs:\n```\n{body}\n```\nthat's from one pod only"


def generate(
    seed: int = 0,
    *,
    messages: int = 600,
    people: int = 15,
    pastes: int = 20,
    paste_lines: int = 150,
    huge_chars: int = 40_000,
    desc_bytes: int = 400_000,
    alerts: int = 500,
    facts: int = 24,
    mentions: int = 4,
) -> WarRoom:
    """One war room: an alert, then `messages` human turns (the last one mentions the bot)."""
    rng = random.Random(seed)
    service = rng.choice(_SERVICES)
    start = datetime(2026, 3, 14, 3, 0, tzinfo=UTC) + timedelta(minutes=rng.randint(0, 120))
    thread_ts = f"C0WAR{seed:04d}-{int(start.timestamp())}.000100"
    room = WarRoom(thread_ts, service)
    room.events.append(_alert(rng, thread_ts, service, start, alerts, desc_bytes))
    users = [f"U{rng.randrange(36**8):08d}" for _ in range(people)]
    slots = list(range(messages - 1))
    rng.shuffle(slots)
    paste_at = set(slots[:pastes])
    fact_at = dict(zip(slots[pastes : pastes + facts], _facts(rng, service, facts), strict=False))
    huge_at = slots[pastes + facts] if huge_chars and len(slots) > pastes + facts else -1
    mention_at = set(slots[pastes + facts + 1 : pastes + facts + mentions])
    for k in range(messages):
        at = start + timedelta(seconds=20 * k + rng.randint(0, 9))
        ts = f"{at.timestamp():.6f}"
        mid = message_id(thread_ts, None, "human", ts)
        text = rng.choice(_CHATTER)
        mention = k in mention_at or k == messages - 1
        if k in paste_at:
            text = _paste(rng, service, paste_lines, at)
        elif k in fact_at:
            sentence, needle, kind = fact_at[k]
            text = f"{sentence}. {rng.choice(_CHATTER)}"
            room.facts.append(Fact(mid, needle, kind))
        elif k == huge_at:
            text = (
                "pasting the whole config diff: "
                + "".join(f"key_{n} = {rng.randrange(10**6)}\n" for n in range(huge_chars // 16))[:huge_chars]
            )
        if k == messages - 1:
            text = f"{BOT} what do we know so far? summarise please"
        elif mention:
            text = f"{BOT} {text}"
        human = HumanMessage(
            thread_ts=thread_ts,
            message_id=mid,
            event_time=at,
            user=rng.choice(users),
            ts=ts,
            text=text,
            mention=mention,
        )
        room.events.append(human)
        room.trigger = human
    return room


def as_rows(room: WarRoom) -> list[Any]:
    """The projection's values of the room's rows, (id, role, content), as the projector writes them."""
    rows: list[Any] = []
    for event in room.events:
        if isinstance(event, AlertReceived):
            content = event.model_dump(
                mode="json",
                include={
                    "status",
                    "service",
                    "alertname",
                    "fingerprint",
                    "window_start",
                    "window_end",
                    "alert",
                },
            )
            rows.append((event.message_id, "alert", content))
        else:
            rows.append(
                (
                    event.message_id,
                    "human",
                    {
                        "user": event.user,
                        "ts": event.ts,
                        "text": event.text,
                        "mention": event.mention,
                        "edit_of": None,
                    },
                )
            )
    return rows
