"""Compact each loghub system as a Loki result; check the budget, the total, the top-5 counts, the error templates.

usage: check_loki_digests.py [DIR]   (needs `incident-memory` on PATH; LOGHUB_BUDGET, default 300)

A fact (count c of a template) is kept when one segment of the digest holds both the number c and a
distinctive literal word of that template. A segment is one object's scalar values, one row of a
list, or one line of a multi-line string: the check does not care whether the digest is JSON or text.

Adapted from the check handed to the project with the corpus (`../shared/corpus/`): the same rule,
as functions, so that the quality benchmark applies it in process too.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def segments(v: Any) -> Iterator[str]:
    if isinstance(v, dict):
        yield " ".join(str(x) for x in v.values() if not isinstance(x, (dict, list)))
        for x in v.values():
            if isinstance(x, list) and all(not isinstance(y, (dict, list)) for y in x):
                yield " ".join(str(y) for y in x)
            if isinstance(x, (dict, list, str)):
                yield from segments(x)
    elif isinstance(v, list):
        if all(not isinstance(y, (dict, list)) for y in v):
            yield " ".join(str(y) for y in v)
        for y in v:
            yield from segments(y)
    elif isinstance(v, str) and "\n" in v:
        yield from v.split("\n")


def kept(segs: list[str], count: int, token: str | None) -> bool:
    pat = re.compile(rf"(?<![\d.]){count}(?![\d])")
    return any(pat.search(s) and (token is None or token in s) for s in segs)


def facts_kept(compact: Any, facts: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(facts kept, facts in all, the lost ones) of one system's digest."""
    segs = [*segments(compact), json.dumps(compact)]
    total = 1 + len(facts["top"]) + len(facts["errors"])
    k = int(kept(segs[-1:], facts["total_lines"], None))
    lost = [] if k else [f"total {facts['total_lines']}"]
    for t in facts["top"] + facts["errors"]:
        if kept(segs[:-1], t["count"], t["token"]):
            k += 1
        else:
            lost.append(f"{t['event']} x{t['count']}")
    return k, total, lost


def main() -> int:
    home = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "loghub")
    budget = int(os.environ.get("LOGHUB_BUDGET", "300"))
    ok_budget = facts_total = facts_found = 0
    lost: list[str] = []
    systems = sorted(glob.glob(f"{home}/*.facts.json"))
    for path in systems:
        with open(path) as fh:
            facts = json.load(fh)
        name = facts["system"]
        with gzip.open(f"{home}/{name}.loki.json.gz", "rt") as fh:
            raw_text = fh.read()
        proc = subprocess.run(
            ["incident-memory", "compact", "--tool", "query_loki", "--budget", str(budget)],
            input=raw_text,
            capture_output=True,
            text=True,
            timeout=120,
        )
        facts_total += 1 + len(facts["top"]) + len(facts["errors"])
        if proc.returncode != 0:
            lost.append(f"{name}: exit {proc.returncode}")
            continue
        out = json.loads(proc.stdout)
        if out.get("tokens", 10**9) <= budget:
            ok_budget += 1
        else:
            lost.append(f"{name}: {out.get('tokens')} tokens")
        k, _, missing = facts_kept(out["compact"], facts)
        facts_found += k
        lost += [f"{name}: {m}" for m in missing]
    if lost:
        print("lost:", "; ".join(lost))
    print(
        f"loghub: {ok_budget}/{len(systems)} within {budget} tokens, facts kept {facts_found}/{facts_total}"
    )
    return 0 if ok_budget == len(systems) and facts_found >= 0.9 * facts_total else 1


if __name__ == "__main__":
    sys.exit(main())
