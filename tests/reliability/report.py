"""Render the results table of RELIABILITY.md from results.jsonl (written by conftest.py).

Run: .venv/bin/python -m tests.reliability.report  (prints markdown; paste into RELIABILITY.md)
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).with_name("results.jsonl")
SKIP = {"test", "outcome", "seconds", "at", "error"}


def main() -> None:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    print("| test | result | seconds | figures |\n|---|---|---|---|")
    for r in rows:
        figures = ", ".join(f"{k}={v}" for k, v in r.items() if k not in SKIP)
        result = r["outcome"] + (f" ({r['error']})" if r.get("error") else "")
        print(f"| `{r['test'].split('::', 1)[1]}` | {result} | {r['seconds']} | {figures} |")
    passed = sum(r["outcome"] == "passed" for r in rows)
    print(f"\n{passed}/{len(rows)} passed")


if __name__ == "__main__":
    main()
