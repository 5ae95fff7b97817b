"""Real logs (the loghub corpus vendored in benchmarks/corpus): budgets, facts and grouping hold.

The corpus's own check (`benchmarks/corpus/check_loki_digests.py`) runs as a user would run it,
through `incident-memory compact`; grouping accuracy is measured against the labels people made.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from services.compaction.loki import line_patterns

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "corpus"


@pytest.mark.slow
def test_every_system_fits_300_tokens_and_keeps_nine_tenths_of_its_facts() -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, str(CORPUS / "check_loki_digests.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary.startswith("loghub: 8/8 within 300 tokens, facts kept ")
    kept, total = (int(x) for x in summary.rsplit(" ", 1)[1].split("/"))
    assert kept >= 0.9 * total


def _accuracy(predicted: list[int], truth: list[str]) -> float:
    by_group: dict[int, list[int]] = defaultdict(list)
    by_truth: dict[str, set[int]] = defaultdict(set)
    for i, (p, t) in enumerate(zip(predicted, truth, strict=True)):
        by_group[p].append(i)
        by_truth[t].add(i)
    right = sum(
        len(m)
        for m in by_group.values()
        if len({truth[i] for i in m}) == 1 and by_truth[truth[m[0]]] == set(m)
    )
    return right / len(truth)


def test_grouping_accuracy_on_full_lines_as_loki_returns_them() -> None:
    scores = {}
    for facts in sorted((CORPUS / "loghub").glob("*.facts.json")):
        system = json.loads(facts.read_text())["system"]
        with gzip.open(CORPUS / "loghub" / f"{system}.loki.json.gz", "rt") as fh:
            raw = json.load(fh)
        src = CORPUS / "loghub" / "src" / system
        lines = (src / f"{system}_2k.log").read_text(encoding="utf-8", errors="replace").split("\n")
        with open(
            src / f"{system}_2k.log_structured.csv", encoding="utf-8", errors="replace", newline=""
        ) as fh:
            label = {line: row["EventId"] for line, row in zip(lines, csv.DictReader(fh), strict=False)}
        grouped = line_patterns(raw)
        scores[system] = _accuracy([p for _, p in grouped], [label[line] for line, _ in grouped])
    assert len(scores) == 8
    assert sum(scores.values()) / len(scores) >= 0.86, scores
    assert min(scores.values()) >= 0.8, scores  # no system left behind
