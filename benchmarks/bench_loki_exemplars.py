"""How many kept Loki patterns show a verbatim line, and how many a skeleton (issue 36 item 3)?

Over the vendored loghub corpus (benchmarks/corpus/loghub, each system one Loki answer), each
system's digest at a budget (300 by default): every pattern it shows, folds of several patterns
aside, is classed as
- verbatim: its text (after the count, times, level and attribution) is the exemplar line itself,
  whole or cut: every run of it between `…` cuts occurs as written in a raw line;
- skeleton: anything else (constant words joined by `...`, digits shown as `*`).

usage: python -m benchmarks.bench_loki_exemplars [BUDGET] [--show]   (pure: no broker, no database)
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from services.compaction.registry import compact_tool_result

CORPUS = Path(__file__).resolve().parent / "corpus" / "loghub"
_HEAD = re.compile(
    r"^\d+× "
    r"(?:(?:\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d+)?(?:–(?:\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d+)?)? )?"
    r"(?:(?:WARN|ERROR|CRIT|FATAL) )?"
    r"(?:\[[^\]]*\] )?"
)
_FOLD = re.compile(r"\(\d+ patterns\)$")
_RANGES = re.compile(r" \[[^\]]*\]$")


def _lines(raw: dict[str, Any]) -> list[str]:
    return [line for stream in raw["data"]["result"] for _, line in stream["values"]]


def verbatim(pattern: str, lines: list[str]) -> bool:
    """Whether a digest's pattern shows its line as written (whole, or cut at `…`)."""
    text = _HEAD.sub("", pattern, count=1)
    for candidate in (text, _RANGES.sub("", text)):
        runs = [r.strip() for r in candidate.split("…") if r.strip()]
        if runs and all(any(run in line for line in lines) for run in runs):
            return True
    return False


def measure(budget: int = 300, show: bool = False) -> dict[str, Any]:
    """Per system: patterns shown, verbatim, skeletons, within budget, the CPU time of the one
    `compact_tool_result` call (cold: its first run in the process); and the totals."""
    systems: dict[str, dict[str, int]] = {}
    for path in sorted(CORPUS.glob("*.loki.json.gz")):
        system = path.name.split(".")[0]
        raw = json.loads(gzip.decompress(path.read_bytes()))
        lines = _lines(raw)
        started = time.process_time()
        digest = compact_tool_result("query_loki", raw, {}, budget=budget)
        cpu_ms = (time.process_time() - started) * 1000
        shown = [p for p in digest.compact.get("patterns", []) if not _FOLD.search(p)]
        skeletons = [p for p in shown if not verbatim(p, lines)]
        if show:
            for p in skeletons:
                print(f"{system}: {p}")
        systems[system] = {
            "kept": len(shown),
            "verbatim": len(shown) - len(skeletons),
            "skeletons": len(skeletons),
            "fits": int(digest.tokens <= budget),
            "cpu_ms": round(cpu_ms),
        }
    totals = {key: sum(s[key] for s in systems.values()) for key in ("kept", "verbatim", "skeletons", "fits")}
    return {"budget": budget, "systems": systems, "totals": totals}


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--show"]
    result = measure(int(args[0]) if args else 300, show="--show" in sys.argv)
    for system, s in result["systems"].items():
        print(
            f"{system:8} kept {s['kept']:3}  verbatim {s['verbatim']:3}  skeletons {s['skeletons']:3}"
            f"  compaction {s['cpu_ms']} ms CPU"
        )
    t = result["totals"]
    print(
        f"budget {result['budget']}: {t['fits']}/{len(result['systems'])} fit; of {t['kept']} kept patterns "
        f"{t['verbatim']} verbatim, {t['skeletons']} skeletons"
    )


if __name__ == "__main__":
    main()
