"""Loki digests of many-stream answers with known facts: is each error named with its count, its app
and (when fewer than all) its pods, and its error field?

Generated answers (seeded, so every run is the same): per answer 2-4 apps, each with 2-6 pods,
each app writing in its own layout (log4j, JSON with nested fields, logfmt, PostgreSQL); info
traffic on every pod; 1-3 error patterns per answer, each on a random subset of one app's pods,
with an error field. The facts of each error: its exact count, its app, the pods it came from
when fewer than all of its app's, and its error text. A fact is kept when one pattern of the digest
holds the count and a word of the error (`N×` and the message), the app (named, or said by the pod
names) and, for a subset, every one of its pods (named, or `k of n pods` when more than two).
Every kept pattern (a fold of several aside) must show a line of its own, whole or cut at `…`, never
a skeleton: the generated lines hold no `...`, so a `...` in a pattern is a skeleton's gap.

usage: python -m benchmarks.bench_loki_streams [ANSWERS]   (pure: no broker, no database)
"""

from __future__ import annotations

import json
import random
import re
import sys
from dataclasses import dataclass
from typing import Any

from services.compaction.registry import compact_tool_result

_FOLD = re.compile(r"\(\d+ patterns\)$")

T0 = 1773457957000000000
BUDGETS = (300, 600)
_LAYOUTS = ("log4j", "json", "logfmt", "postgres")
_ERRORS = (
    ("Disk full writing segment", "No space left on device"),
    ("charge failed", "dial tcp 10.0.0.7:5432: connect: connection refused"),
    ("replication slot lag too large", "wal_keep_size exceeded"),
    ("request to upstream failed", "context deadline exceeded"),
    ("could not serialize access", "concurrent update"),
)


@dataclass(frozen=True)
class ErrorFact:
    message: str
    error: str
    count: int
    app: str
    pods: tuple[str, ...]  # the pods it came from
    of: int  # how many pods the app has


def _line(layout: str, level: str, message: str, error: str | None, n: int) -> str:
    if layout == "json":
        body: dict[str, Any] = {"level": level, "msg": message, "req": {"id": f"r{n}", "ms": n % 97}}
        if error:
            body["error"] = error
        return json.dumps(body)
    if layout == "logfmt":
        tail = f' err="{error}"' if error else ""
        return f'ts=2026-03-14T03:12:{n % 60:02d}Z level={level} msg="{message}" id={n}{tail}'
    if layout == "postgres":
        tag = "ERROR" if level == "error" else "LOG"
        tail = f": {error}" if error else f" {n}"
        return f"2026-03-14 03:12:{n % 60:02d}.123 UTC [{1000 + n % 50}] {tag}:  {message}{tail}"
    tail = f" ({error})" if error else f" {n}"
    return f"[2026-03-14 03:12:{n % 60:02d},123] {level.upper()} [worker-{n % 4}] {message}{tail} (app.Main)"


def answer(seed: int) -> tuple[dict[str, Any], list[ErrorFact]]:
    rng = random.Random(seed)
    apps = [
        f"{name}-{seed}"
        for name in rng.sample(["kafka", "checkout-api", "postgres", "cart", "auth"], rng.randint(2, 4))
    ]
    streams: dict[tuple[str, str], list[str]] = {}
    layout = {app: rng.choice(_LAYOUTS) for app in apps}
    pods = {
        app: [f"{app}-7f9c{rng.randrange(16**4):04x}-{k}" for k in range(rng.randint(2, 6))] for app in apps
    }
    for app in apps:
        for pod in pods[app]:
            streams[(app, pod)] = [
                _line(
                    layout[app],
                    "info",
                    rng.choice(["served request", "heartbeat ok", "flushed batch"]),
                    None,
                    n,
                )
                for n in range(rng.randint(20, 60))
            ]
    facts = []
    for message, error in rng.sample(_ERRORS, rng.randint(1, 3)):
        app = rng.choice(apps)
        chosen = tuple(sorted(rng.sample(pods[app], rng.randint(1, len(pods[app])))))
        count = 0
        for pod in chosen:
            k = rng.randint(3, 40)
            streams[(app, pod)] += [_line(layout[app], "error", message, error, n) for n in range(k)]
            count += k
        facts.append(ErrorFact(message, error, count, app, chosen, len(pods[app])))
    result = [
        {
            "stream": {"namespace": "prod", "app": app, "pod": pod},
            "values": [[str(T0 + i * 997_000_000 + j), line] for j, (i, line) in enumerate(enumerate(lines))],
        }
        for (app, pod), lines in sorted(streams.items())
    ]
    return {"status": "success", "data": {"resultType": "streams", "result": result}}, facts


def kept(patterns: list[str], fact: ErrorFact) -> dict[str, bool]:
    """Which parts of one error fact one pattern of the digest keeps."""
    mine = [p for p in patterns if p.startswith(f"{fact.count}×") and fact.message.split()[0] in p]
    best = {"count": bool(mine), "app": False, "pods": False, "error": False}
    for p in mine:
        where = p[p.find("[") : p.find("]") + 1] if "[" in p else ""
        app = f"app={fact.app}" in where or (bool(where) and fact.app in where and "pod" in where)
        if len(fact.pods) == fact.of:
            pods = not any(pod in where for pod in fact.pods) and "pods:" not in where
        elif len(fact.pods) <= 2:
            pods = all(pod.rsplit("-", 1)[-1] in where for pod in fact.pods) and (
                f"{len(fact.pods)} of {fact.of}" in where or "only" in where
            )
        else:
            pods = f"{len(fact.pods)} of {fact.of} pods" in where
        error = fact.error.split()[0].rstrip(":") in p
        best = {"count": True, "app": app, "pods": pods, "error": error}
        if app and pods and error:
            break
    return best


def skeletons(patterns: list[str]) -> list[str]:
    """The kept patterns shown as a skeleton (constant words joined by `...`), folds aside."""
    return [p for p in patterns if "..." in p and not _FOLD.search(p)]


def run(answers: int = 50) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for budget in BUDGETS:
        tally = {"answers": answers, "fits": 0, "errors": 0, "count": 0, "app": 0, "pods": 0, "error": 0}
        tally |= {"kept": 0, "skeletons": 0}
        for seed in range(answers):
            raw, facts = answer(seed)
            digest = compact_tool_result("query_loki", raw, {"evidence_id": f"bench:{seed}"}, budget=budget)
            tally["fits"] += digest.tokens <= budget
            patterns = digest.compact.get("patterns", [])
            tally["kept"] += sum(not _FOLD.search(p) for p in patterns)
            tally["skeletons"] += len(skeletons(patterns))
            for fact in facts:
                tally["errors"] += 1
                for key, ok in kept(patterns, fact).items():
                    tally[key] += ok
        out[str(budget)] = tally
    return out


def main() -> None:
    answers = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    for budget, t in run(answers).items():
        e = t["errors"]
        print(
            f"budget {budget}: {t['fits']}/{t['answers']} fit; of {e} error patterns: count {t['count']}/{e}, "
            f"app {t['app']}/{e}, pods {t['pods']}/{e}, error field {t['error']}/{e}; "
            f"of {t['kept']} kept patterns {t['skeletons']} skeletons"
        )


if __name__ == "__main__":
    main()
